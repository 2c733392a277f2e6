package memcached

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

// Options configure the controller.
type Options struct {
	// Images are the images of Memcacheds whose spec names none.
	Images desired.Images
	// WatchNamespaces are the namespaces whose Memcacheds are reconciled;
	// all when empty.
	WatchNamespaces []string
	// MaxConcurrentReconciles is the number of Memcacheds reconciled at once.
	MaxConcurrentReconciles int
	// SyncPeriod is how often every Memcached is reconciled again, though
	// nothing changed (0: never): the resync period of the store of owned
	// objects, whose events reconcile their Memcached, and of the manager's
	// cache (see CacheOptions). (A resync of the
	// Memcacheds themselves reconciles nothing: the controller reacts to
	// new generations only.)
	SyncPeriod time.Duration
}

// Setup adds the Memcached controller to mgr, with the store of the
// objects it owns. mgr's cache must be set up by CacheOptions with the
// same namespaces.
func Setup(mgr ctrl.Manager, o Options) error {
	serviceMonitors, err := owned.LearnServiceMonitors(context.Background(), mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("looking for the ServiceMonitor CRD: %w", err)
	}
	mgr.GetLogger().WithName("setup").Info("ServiceMonitors", "served", serviceMonitors)
	store, err := owned.NewStore(mgr.GetConfig(), mgr.GetHTTPClient(), o.WatchNamespaces, labels.SelectorFromSet(labels.Set{desired.LabelManagedBy: desired.ManagedBy}), o.SyncPeriod, serviceMonitors)
	if err != nil {
		return fmt.Errorf("creating the store of owned objects: %w", err)
	}
	if err := mgr.Add(store); err != nil {
		return fmt.Errorf("adding the store of owned objects: %w", err)
	}
	r := &Reconciler{
		Client:          mgr.GetClient(),
		APIReader:       mgr.GetAPIReader(),
		Owned:           store,
		Recorder:        mgr.GetEventRecorder("memcached-operator"),
		Images:          o.Images,
		ServiceMonitors: serviceMonitors,
	}
	return r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles})
}

// CacheOptions sets up the manager's cache for the controller: it holds the
// Memcacheds (whole, but for other managers' managed-fields entries; see
// owned.KeepOwnManagedFields) and, when namespaces is not empty, only those
// of these namespaces (the operator then lists and watches nothing
// cluster-wide, so namespaced Roles suffice). The objects the operator
// owns are not in it: the controller keeps summaries of them in an
// owned.Store, and a read of any kind the cache does not hold fails rather
// than starting a watch of it.
func CacheOptions(base cache.Options, namespaces []string) cache.Options {
	base.ReaderFailOnMissingInformer = true
	// A default transform, not one by object: an entry of ByObject makes
	// the cache ask the apiserver's discovery at construction whether
	// Memcacheds are namespaced, which fails while the CRD is new.
	base.DefaultTransform = owned.KeepOwnManagedFields
	if len(namespaces) > 0 {
		base.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			base.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return base
}
