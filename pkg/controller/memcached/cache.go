package memcached

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
)

// CacheOptions restricts the manager's cache to what the controller reads:
// Deployments, Services and PodDisruptionBudgets labelled as the
// operator's (not every one of the cluster), without kubectl's
// last-applied-configuration annotation; and, when namespaces is not empty,
// only objects in those namespaces (the operator then lists and watches
// nothing cluster-wide, so namespaced Roles suffice).
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

// trim drops from cached objects what the operator never reads there:
// kubectl's last-applied-configuration annotation, which can be as large as
// the object itself, and every managed-fields entry but the operator's own
// (FieldManager's on the objects it makes, StatusFieldManager's on a
// Memcached), which the no-op comparison reads. The controller-manager's
// status entry of each Deployment, and the entries of GitOps tools and
// people, stay on the apiserver; drift reporting reads them there.
func trim(obj any) (any, error) {
	o, ok := obj.(client.Object)
	if !ok {
		return obj, nil
	}
	if a := o.GetAnnotations(); a != nil {
		if _, found := a["kubectl.kubernetes.io/last-applied-configuration"]; found {
			delete(a, "kubectl.kubernetes.io/last-applied-configuration")
			o.SetAnnotations(a)
		}
	}
	keep := FieldManager
	if _, ok := o.(*cachev1alpha1.Memcached); ok {
		keep = StatusFieldManager
	}
	o.SetManagedFields(slices.DeleteFunc(o.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager != keep
	}))
	return obj, nil
}
