package memcached

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	base.DefaultTransform = trimLastApplied
	return base
}

// trimLastApplied drops kubectl's last-applied-configuration annotation from
// cached objects: the operator never reads it, and it can be as large as the
// object itself. Managed fields stay: the operator reads its own.
func trimLastApplied(obj any) (any, error) {
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
	return obj, nil
}
