package memcached

import (
	"fmt"
	"hash/maphash"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	cacheac "github.com/example/memcached-operator/applyconfig/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
)

// CacheOptions restricts the manager's cache to what the controller reads:
// Deployments, Services and PodDisruptionBudgets labelled as the
// operator's (not every one of the cluster), each kept as a summary (see
// summarize); and, when namespaces is not empty, only objects in those
// namespaces (the operator then lists and watches nothing cluster-wide, so
// namespaced Roles suffice).
func CacheOptions(base cache.Options, namespaces []string) cache.Options {
	ours := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{desired.LabelManagedBy: desired.ManagedBy})}
	base.ByObject = map[client.Object]cache.ByObject{
		&appsv1.Deployment{}:            ours,
		&corev1.Service{}:               ours,
		&policyv1.PodDisruptionBudget{}: ours,
	}
	if len(namespaces) > 0 {
		base.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			base.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	base.DefaultTransform = trim
	return base
}

// trim is the cache's transform: it replaces each object as the watch
// delivers it by its summary.
func trim(obj any) (any, error) {
	o, ok := obj.(client.Object)
	if !ok {
		return obj, nil
	}
	s, err := summarize(o)
	if err != nil {
		// Keep the whole object: reconciling it computes the digest again
		// and reports the error.
		return obj, nil
	}
	return s, nil
}

// digestAnnotation carries, on summaries only, the digest of what the
// operator owns of the object. The apiserver never sees it: the operator
// sends only apply configurations it builds, never an object it read.
const digestAnnotation = "memcached-operator.cache.example.com/owned-digest"

// summarize returns what the controller reads of obj, which is far less
// than obj: at 10,000 Memcacheds the cache is most of the operator's
// memory. A summary keeps
//   - the metadata the controller reads: name, namespace, UID,
//     resourceVersion, generation, timestamps, owner references, and the
//     operator's managed-fields entry without its field set (its time tells
//     when the operator last applied);
//   - of a Deployment, spec.replicas and the status; of a Service,
//     spec.ports; of a PodDisruptionBudget, nothing more; of a Memcached,
//     the spec and the type, status and transition time of each condition;
//   - in digestAnnotation, the digest of what the operator owns of obj (its
//     FieldManager's entry; StatusFieldManager's on a Memcached), computed
//     from the whole object, which the no-op comparison and drift detection
//     read instead of the field sets.
//
// Labels, other annotations, other managers' entries, the rest of the spec
// and status are dropped. A summary is never written back. Objects of
// other types are returned as they are.
func summarize(obj client.Object) (client.Object, error) {
	switch obj.(type) {
	case *appsv1.Deployment, *corev1.Service, *policyv1.PodDisruptionBudget, *cachev1alpha1.Memcached:
	default:
		return obj, nil // nothing to summarize, and no digest to compute
	}
	d, err := computeDigest(obj)
	if err != nil {
		return nil, err
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &appsv1.Deployment{
			TypeMeta:   o.TypeMeta,
			ObjectMeta: summaryMeta(o, d, FieldManager),
			Spec:       appsv1.DeploymentSpec{Replicas: o.Spec.Replicas},
			Status:     o.Status,
		}, nil
	case *corev1.Service:
		return &corev1.Service{
			TypeMeta:   o.TypeMeta,
			ObjectMeta: summaryMeta(o, d, FieldManager),
			Spec:       corev1.ServiceSpec{Ports: o.Spec.Ports},
		}, nil
	case *policyv1.PodDisruptionBudget:
		return &policyv1.PodDisruptionBudget{
			TypeMeta:   o.TypeMeta,
			ObjectMeta: summaryMeta(o, d, FieldManager),
		}, nil
	case *cachev1alpha1.Memcached:
		s := &cachev1alpha1.Memcached{
			TypeMeta:   o.TypeMeta,
			ObjectMeta: summaryMeta(o, d, StatusFieldManager),
			Spec:       o.Spec,
		}
		for _, c := range o.Status.Conditions {
			s.Status.Conditions = append(s.Status.Conditions, metav1.Condition{
				Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime,
			})
		}
		return s, nil
	}
	return obj, nil
}

func summaryMeta(o client.Object, d ownedDigest, manager string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Name:              o.GetName(),
		Namespace:         o.GetNamespace(),
		UID:               o.GetUID(),
		ResourceVersion:   o.GetResourceVersion(),
		Generation:        o.GetGeneration(),
		CreationTimestamp: o.GetCreationTimestamp(),
		DeletionTimestamp: o.GetDeletionTimestamp(),
		OwnerReferences:   o.GetOwnerReferences(),
		Annotations:       map[string]string{digestAnnotation: d.String()},
	}
	for _, e := range o.GetManagedFields() {
		if e.Manager == manager {
			e.FieldsV1 = nil
			m.ManagedFields = append(m.ManagedFields, e)
		}
	}
	return m
}

// ownedDigest sums up what one field manager owns of an object: values
// hashes the apply configuration that extracting the manager's fields gives,
// as JSON, so that it equals the hash of a desired apply configuration
// exactly when applying that would change nothing; fields hashes the leaf
// field paths the manager owns, so that it equals the hash of the paths a
// desired apply configuration sets exactly when it owns all and only those.
type ownedDigest struct {
	values, fields uint64
}

// digestSeed seeds every hash of the process; digests never leave it.
var digestSeed = maphash.MakeSeed()

func (d ownedDigest) String() string { return fmt.Sprintf("%016x.%016x", d.values, d.fields) }

// ownedDigestOf returns the digest of what the operator owns of obj: read
// from a summary, computed on a whole object.
func ownedDigestOf(obj client.Object) (ownedDigest, error) {
	var d ownedDigest
	if s, ok := obj.GetAnnotations()[digestAnnotation]; ok && !hasFieldSets(obj) {
		if _, err := fmt.Sscanf(s, "%016x.%016x", &d.values, &d.fields); err != nil {
			return d, fmt.Errorf("reading the digest of %s: %w", obj.GetName(), err)
		}
		return d, nil
	}
	return computeDigest(obj)
}

// computeDigest computes the digest of what the operator owns of obj from
// its managed fields.
func computeDigest(obj client.Object) (ownedDigest, error) {
	var d ownedDigest
	var owned any
	var err error
	manager, subresource := FieldManager, ""
	switch o := obj.(type) {
	case *appsv1.Deployment:
		owned, err = deployments.extract(o, FieldManager)
	case *corev1.Service:
		owned, err = services.extract(o, FieldManager)
	case *policyv1.PodDisruptionBudget:
		owned, err = podDisruptionBudgets.extract(o, FieldManager)
	case *cachev1alpha1.Memcached:
		manager, subresource = StatusFieldManager, "status"
		owned, err = cacheac.ExtractMemcachedStatus(o, StatusFieldManager)
	default:
		return d, fmt.Errorf("no digest for %T", obj)
	}
	if err != nil {
		return d, fmt.Errorf("extracting the operator's fields of %s: %w", obj.GetName(), err)
	}
	if d.values, err = valuesDigest(owned); err != nil {
		return d, err
	}
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == subresource {
			s, err := fieldSet(e)
			if err != nil {
				return d, err
			}
			if d.fields, err = fieldsDigest(s.Leaves()); err != nil {
				return d, err
			}
			return d, nil
		}
	}
	d.fields, err = fieldsDigest(emptyFieldSet)
	return d, err
}

// hasFieldSets tells a whole object from a summary: the apiserver records
// a field set with every managed-fields entry.
func hasFieldSets(obj client.Object) bool {
	for _, e := range obj.GetManagedFields() {
		if e.FieldsV1 != nil {
			return true
		}
	}
	return false
}
