package owned

import (
	"reflect"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/pkg/desired"
)

// Descriptor is all the operator knows of a kind of object it makes for a
// Memcached, in one place: the store watches, summarizes and digests the
// kind by it, the controller names, reads, applies and deletes its objects
// by it, the status names a foreign object of it by it, and the packaging
// lists it among the CSV's owned resources. Adding a kind is an entry of
// Kinds (with its RBAC marker, beside it), its builder in package desired,
// and its phase (pkg/controller/memcached, phases.go).
type Descriptor struct {
	Kind Kind
	// Resource is the kind's group, version and resource.
	Resource schema.GroupVersionResource
	// New returns an empty object of the kind.
	New func() client.Object
	// Extract returns what FieldManager owns of obj, an object of the
	// kind, as an apply configuration.
	Extract func(obj client.Object, schemas *Schemas) (any, error)
	// Summarize, if set, copies into s what the controller reads of obj
	// beyond its metadata.
	Summarize func(obj client.Object, s *Summary)
	// Suffix follows the Memcached's name in the object's.
	Suffix string
	// ServedByCRD: only a cluster with the kind's CRD serves it (see
	// Schemas); the store watches it only there.
	ServedByCRD bool
}

// NotOwnedReason is the reason of the conditions and the event when an
// object of d's kind with the Memcached's name is not the Memcached's (the
// constants of api/v1alpha1 name them).
func (d Descriptor) NotOwnedReason() string { return string(d.Kind) + "NotOwned" }

// The verbs the operator needs on each of Kinds:
//
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch;delete

// Kinds are the kinds the operator makes for a Memcached, in the order the
// store watches them.
var Kinds = []Descriptor{
	{
		Kind:     KindStatefulSet,
		Resource: appsv1.SchemeGroupVersion.WithResource("statefulsets"),
		New:      func() client.Object { return &appsv1.StatefulSet{} },
		Extract: func(obj client.Object, _ *Schemas) (any, error) {
			return appsv1ac.ExtractStatefulSet(obj.(*appsv1.StatefulSet), FieldManager)
		},
		Summarize: func(obj client.Object, s *Summary) {
			o := obj.(*appsv1.StatefulSet)
			s.Replicas, s.Selector, s.Status = o.Spec.Replicas, o.Spec.Selector, o.Status
			s.RestartedFor = o.Spec.Template.Annotations[desired.AnnotationRestartedFor]
			s.OnDelete = o.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType
		},
	},
	{
		// The workload of the operator's versions before slots, and of
		// the Operator SDK tutorial's: watched so that the operator
		// replaces one with its StatefulSet.
		Kind:     KindDeployment,
		Resource: appsv1.SchemeGroupVersion.WithResource("deployments"),
		New:      func() client.Object { return &appsv1.Deployment{} },
		Extract: func(obj client.Object, _ *Schemas) (any, error) {
			return appsv1ac.ExtractDeployment(obj.(*appsv1.Deployment), FieldManager)
		},
		Summarize: func(obj client.Object, s *Summary) {
			o := obj.(*appsv1.Deployment)
			s.Replicas, s.Selector, s.DeploymentStatus = o.Spec.Replicas, o.Spec.Selector, o.Status
		},
	},
	{
		Kind:     KindService,
		Resource: corev1.SchemeGroupVersion.WithResource("services"),
		New:      func() client.Object { return &corev1.Service{} },
		Extract: func(obj client.Object, _ *Schemas) (any, error) {
			return corev1ac.ExtractService(obj.(*corev1.Service), FieldManager)
		},
		Summarize: func(obj client.Object, s *Summary) { s.Ports = obj.(*corev1.Service).Spec.Ports },
	},
	{
		Kind:     KindPodDisruptionBudget,
		Resource: policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"),
		New:      func() client.Object { return &policyv1.PodDisruptionBudget{} },
		Extract: func(obj client.Object, _ *Schemas) (any, error) {
			return policyv1ac.ExtractPodDisruptionBudget(obj.(*policyv1.PodDisruptionBudget), FieldManager)
		},
	},
	{
		Kind:     KindNetworkPolicy,
		Resource: networkingv1.SchemeGroupVersion.WithResource("networkpolicies"),
		New:      func() client.Object { return &networkingv1.NetworkPolicy{} },
		Extract: func(obj client.Object, _ *Schemas) (any, error) {
			return networkingv1ac.ExtractNetworkPolicy(obj.(*networkingv1.NetworkPolicy), FieldManager)
		},
	},
	{
		Kind:     KindConfigMap,
		Resource: corev1.SchemeGroupVersion.WithResource("configmaps"),
		New:      func() client.Object { return &corev1.ConfigMap{} },
		Extract: func(obj client.Object, _ *Schemas) (any, error) {
			return corev1ac.ExtractConfigMap(obj.(*corev1.ConfigMap), FieldManager)
		},
		Summarize: func(obj client.Object, s *Summary) {
			if o := obj.(*corev1.ConfigMap); isMembershipOf(o) {
				s.Membership = bounded(o.Data[desired.MembershipKey])
				s.Move = bounded(o.Data[desired.MoveKey])
			}
		},
		Suffix: desired.MembershipSuffix,
	},
	{
		Kind:     KindServiceMonitor,
		Resource: monitoringv1.SchemeGroupVersion.WithResource(monitoringv1.ServiceMonitorName),
		New:      func() client.Object { return &monitoringv1.ServiceMonitor{} },
		Extract: func(obj client.Object, schemas *Schemas) (any, error) {
			return extractServiceMonitor(obj.(*monitoringv1.ServiceMonitor), schemas)
		},
		ServedByCRD: true,
	},
}

// Describe is the Descriptor of kind k; ok is false for a kind the
// operator does not make.
func Describe(k Kind) (d Descriptor, ok bool) {
	for _, d := range Kinds {
		if d.Kind == k {
			return d, true
		}
	}
	return Descriptor{}, false
}

// describeObject is the Descriptor of obj's kind.
func describeObject(obj client.Object) (Descriptor, bool) {
	for _, d := range Kinds {
		if sameType(d.New(), obj) {
			return d, true
		}
	}
	return Descriptor{}, false
}

func sameType(a, b any) bool { return reflect.TypeOf(a) == reflect.TypeOf(b) }
