package memcached

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/pkg/desired"
)

// CacheOptions restricts the manager's cache to what the controller reads:
// Deployments labelled as the operator's (not every Deployment of the
// cluster), without kubectl's last-applied-configuration annotation.
func CacheOptions(base cache.Options) cache.Options {
	base.ByObject = map[client.Object]cache.ByObject{
		&appsv1.Deployment{}: {Label: labels.SelectorFromSet(labels.Set{desired.LabelManagedBy: desired.ManagedBy})},
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
