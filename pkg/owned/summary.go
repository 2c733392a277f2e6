// Package owned is what the operator knows of the objects it owns: a
// Summary of each StatefulSet, Deployment, Service, PodDisruptionBudget,
// ServiceMonitor and NetworkPolicy it made, kept in a Store that watches only those
// (store.go); and the one rule that makes a Memcached at rest cost no
// request (applies.go): an apply configuration the operator builds equals,
// field for field, what the apiserver recorded of the operator's last apply
// exactly when applying it would change nothing. The rule's inputs include
// the Schemas of the owned kinds (schemas.go).
//
// A Summary is not the object. It holds the few fields the controller reads
// and a Digest of what the operator owns; reading it cannot be mistaken for
// reading a whole Deployment.
package owned

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
)

// Field managers of the operator. They are part of its API: the apiserver
// records which fields each one owns, and renaming one would orphan those
// fields on every object.
const (
	// FieldManager owns the fields the operator sets on the objects it
	// creates for a Memcached: its StatefulSet, Service,
	// PodDisruptionBudget, ServiceMonitor and NetworkPolicy.
	FieldManager = "memcached-operator"
	// StatusFieldManager owns the fields the operator sets in a Memcached's
	// status: its conditions, observedGeneration, replicas, readyReplicas,
	// selector, image and service.
	StatusFieldManager = "memcached-operator-status"
)

// Kind is a kind of object the operator owns.
type Kind string

// The kinds of objects the operator makes for a Memcached: Kinds describes
// each.
const (
	KindStatefulSet         Kind = "StatefulSet"
	KindDeployment          Kind = "Deployment"
	KindService             Kind = "Service"
	KindPodDisruptionBudget Kind = "PodDisruptionBudget"
	// KindServiceMonitor is the Prometheus Operator's ServiceMonitor, made
	// only in clusters that have its CRD.
	KindServiceMonitor Kind = "ServiceMonitor"
	// KindNetworkPolicy is made only for a Memcached that asks for one.
	KindNetworkPolicy Kind = "NetworkPolicy"
	// KindConfigMap is the membership a Memcached's discovery endpoint
	// serves ("<name>-membership").
	KindConfigMap Kind = "ConfigMap"
)

// Summary is what the operator keeps of a StatefulSet, Deployment, Service,
// PodDisruptionBudget, ServiceMonitor or NetworkPolicy: with many Memcacheds these objects
// would be most of its memory (docs/benchmarks.md), and it reads little of
// them.
//
// Its metadata holds only the name, namespace, UID, resourceVersion,
// generation, creation and deletion timestamps, owner references, and the
// operator's own apply entry in managedFields without its field set (the
// entry's time tells when the operator last applied). Labels, annotations
// and other managers' entries are not kept.
//
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
type Summary struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Digest sums up what FieldManager owns of the object, computed from
	// the whole object; nil when it could not be computed (DigestError
	// says why).
	Digest *Digest `json:"digest,omitempty"`
	// DigestError is why Digest is nil.
	DigestError string `json:"digestError,omitempty"`

	// Replicas is a StatefulSet's or a Deployment's spec.replicas.
	Replicas *int32 `json:"replicas,omitempty"`
	// Selector is a StatefulSet's or a Deployment's spec.selector.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Status is a StatefulSet's status; empty for other kinds.
	Status appsv1.StatefulSetStatus `json:"status,omitempty"`
	// DeploymentStatus is a Deployment's status; empty for other kinds.
	DeploymentStatus appsv1.DeploymentStatus `json:"deploymentStatus,omitempty"`
	// Ports are a Service's spec.ports.
	Ports []corev1.ServicePort `json:"ports,omitempty"`
	// Membership is a membership ConfigMap's desired.MembershipKey: the
	// cluster its Memcached's pods serve, which the next one follows.
	Membership string `json:"membership,omitempty"`
	// Move is a membership ConfigMap's desired.MoveKey: the move of keys
	// under way, if any.
	Move string `json:"move,omitempty"`
	// RestartedFor is a StatefulSet's pod template annotation
	// desired.AnnotationRestartedFor: the Secret content its pods were
	// last restarted for, which the operator applies again.
	RestartedFor string `json:"restartedFor,omitempty"`
	// OnDelete: a StatefulSet whose pods the operator rolls (the OnDelete
	// update strategy); its controller never advances
	// status.currentRevision then.
	OnDelete bool `json:"onDelete,omitempty"`
}

// Kind is the kind of object s summarizes.
func (s *Summary) Kind() Kind { return Kind(s.TypeMeta.Kind) }

// Summarize returns the summary of a StatefulSet, Deployment, Service,
// PodDisruptionBudget, ServiceMonitor or NetworkPolicy, with the digest of what
// FieldManager owns of it (typed with schemas). obj must be whole, as the
// apiserver returns it.
func Summarize(obj client.Object, schemas *Schemas) (*Summary, error) {
	s, err := SummarizeAnswer(obj)
	if err != nil {
		return nil, err
	}
	d, err := digestOf(obj, schemas)
	if err != nil {
		s.DigestError = err.Error()
		return s, nil
	}
	s.Digest = &d
	return s, nil
}

// SummarizeAnswer returns the summary of obj without a digest: for the
// apiserver's answer to an apply, which carries no managed fields to
// compute one from. The controller reads it for the status, never to
// compare.
func SummarizeAnswer(obj client.Object) (*Summary, error) {
	d, ok := describeObject(obj)
	if !ok {
		return nil, fmt.Errorf("no summary for %T", obj)
	}
	s := &Summary{
		TypeMeta:   metav1.TypeMeta{APIVersion: d.Resource.GroupVersion().String(), Kind: string(d.Kind)},
		ObjectMeta: summaryMeta(obj),
	}
	if d.Summarize != nil {
		d.Summarize(obj, s)
	}
	return s, nil
}

// maxMembershipData bounds what a summary keeps of a membership
// ConfigMap's key: far more than a membership of the most slots a
// Memcached may have, or a plan of two, takes. A longer value is not the
// operator's, and is kept as none.
const maxMembershipData = 128 << 10

// isMembershipOf tells whether cm is a Memcached's membership ConfigMap:
// controlled by a Memcached, and named after it. Only such a ConfigMap's
// data is kept: anyone may label a ConfigMap as the operator's, but the
// garbage collector removes one whose owner does not exist, and a
// Memcached has one name, so what the store keeps of ConfigMaps is
// bounded by the Memcacheds it serves.
func isMembershipOf(cm *corev1.ConfigMap) bool {
	ref := metav1.GetControllerOfNoCopy(cm)
	return ref != nil && ref.Kind == cachev1alpha1.Kind && ref.APIVersion == cachev1alpha1.SchemeGroupVersion.String() &&
		cm.Name == ref.Name+desired.MembershipSuffix
}

func bounded(v string) string {
	if len(v) > maxMembershipData {
		return ""
	}
	return v
}

// summaryMeta is the metadata a summary keeps of o: of its owner
// references, the controller's only (the one the operator reads), so that
// an object labelled as the operator's by another hand costs the store a
// few hundred bytes, whatever it carries.
func summaryMeta(o client.Object) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Name:              o.GetName(),
		Namespace:         o.GetNamespace(),
		UID:               o.GetUID(),
		ResourceVersion:   o.GetResourceVersion(),
		Generation:        o.GetGeneration(),
		CreationTimestamp: o.GetCreationTimestamp(),
		DeletionTimestamp: o.GetDeletionTimestamp(),
	}
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		m.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	if e := ownApply(o.GetManagedFields()); e != nil {
		own := *e
		own.FieldsV1 = nil
		m.ManagedFields = []metav1.ManagedFieldsEntry{own}
	}
	return m
}

// LastApplied is when the apiserver recorded the operator's last apply of
// the object, or nil when it holds no such record.
func (s *Summary) LastApplied() *metav1.Time {
	if e := ownApply(s.ManagedFields); e != nil {
		return e.Time
	}
	return nil
}

// DesiredReplicas is a StatefulSet's or a Deployment's spec.replicas, with the apiserver's
// default of 1 when it holds none.
func (s *Summary) DesiredReplicas() int32 {
	if s.Replicas == nil {
		return 1
	}
	return *s.Replicas
}
