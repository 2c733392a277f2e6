package memcached

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/autoscale"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/reconnect"
	"github.com/example/memcached-operator/pkg/secrets"
)

// DefaultReplacedManagers is the field manager of the Operator SDK
// tutorial's operator: its binary's name.
const DefaultReplacedManagers = "manager"

// OwnSelector selects the objects the operator made, by their label;
// OthersSelector the others of the same kinds, whose names the store keeps.
var (
	OwnSelector    = labels.SelectorFromSet(labels.Set{desired.LabelManagedBy: desired.ManagedBy})
	OthersSelector = func() labels.Selector {
		r, err := labels.NewRequirement(desired.LabelManagedBy, selection.NotEquals, []string{desired.ManagedBy})
		if err != nil {
			panic(err)
		}
		return labels.NewSelector().Add(*r)
	}()
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
	// ReplacedManagers are the field managers of the operator this one
	// replaces (see Reconciler.ReplacedManagers).
	ReplacedManagers []string
	// TakeOver lets the operator replace the tutorial operator's
	// Deployments (see Reconciler.TakeOver).
	TakeOver bool
	// SyncPeriod is how often every Memcached is reconciled again, though
	// nothing changed (0: never): the resync period of the store of owned
	// objects, whose events reconcile their Memcached, and of the manager's
	// cache (see CacheOptions). (A resync of the
	// Memcacheds themselves reconciles nothing: the controller reacts to
	// new generations only.)
	SyncPeriod time.Duration
	// AutoscaleInterval is how often the pods of the Memcacheds with
	// spec.autoscaling are read.
	AutoscaleInterval time.Duration
}

// DefaultAutoscaleInterval is how often the pods of a Memcached with
// spec.autoscaling are read: each reading is one HTTP request to each
// pod, and memcached's "stats" (its working set walked at most once per
// autoscale.DumpEvery).
const DefaultAutoscaleInterval = 30 * time.Second

// Setup adds the Memcached controller to mgr, with the store of the
// objects it owns. mgr's cache must be set up by CacheOptions with the
// same namespaces.
func Setup(mgr ctrl.Manager, o Options) error {
	schemas, err := owned.LearnSchemas(context.Background(), mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("looking for the ServiceMonitor CRD: %w", err)
	}
	mgr.GetLogger().WithName("setup").Info("ServiceMonitors", "served", schemas.ServiceMonitors())
	store, err := owned.NewStore(mgr.GetConfig(), mgr.GetHTTPClient(), o.WatchNamespaces, OwnSelector, OthersSelector, o.SyncPeriod, schemas)
	if err != nil {
		return fmt.Errorf("creating the store of owned objects: %w", err)
	}
	if err := mgr.Add(store); err != nil {
		return fmt.Errorf("adding the store of owned objects: %w", err)
	}
	clientset, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("creating the client of Secrets: %w", err)
	}
	var queue enqueuer
	watcher := secrets.NewWatcher(clientset, queue.add)
	if err := mgr.Add(watcher); err != nil {
		return fmt.Errorf("adding the Secret watcher: %w", err)
	}
	interval := o.AutoscaleInterval
	if interval <= 0 {
		interval = DefaultAutoscaleInterval
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: 2 * interval}}
	scaler := &Autoscaler{
		Client:    mgr.GetClient(),
		Pods:      func(m *cachev1alpha1.Memcached) ([]*owned.Pod, error) { return memcachedPods(store, m) },
		APIReader: mgr.GetAPIReader(),
		Recorder:  boundedNotes{mgr.GetEventRecorder("memcached-operator")},
		Interval:  interval,
		Enqueue:   queue.add,
		Read: func(ctx context.Context, ip string, seconds int64) (autoscale.Signals, error) {
			return autoscale.Fetch(ctx, hc, ip, seconds)
		},
	}
	if err := mgr.Add(scaler); err != nil {
		return fmt.Errorf("adding the autoscaler: %w", err)
	}
	r := &Reconciler{
		Client:           mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		Owned:            store,
		Recorder:         boundedNotes{mgr.GetEventRecorder("memcached-operator")},
		Schemas:          schemas,
		Images:           o.Images,
		Secrets:          watcher,
		Logs:             ClientsetLogs{Clientset: clientset},
		ReplacedManagers: o.ReplacedManagers,
		TakeOver:         o.TakeOver,
		Autoscaler:       scaler,
	}
	return r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}, queue.source())
}

// enqueuer reconciles Memcacheds by name, from outside the watches the
// builder knows: it adds to the controller's queue once that has started.
type enqueuer struct {
	queue atomic.Pointer[workqueue.TypedRateLimitingInterface[reconcile.Request]]
}

func (e *enqueuer) source() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		e.queue.Store(&q)
		return nil
	})
}

func (e *enqueuer) add(memcached types.NamespacedName) {
	if q := e.queue.Load(); q != nil {
		(*q).Add(reconcile.Request{NamespacedName: memcached})
	}
}

// CacheOptions sets up the manager's cache for the controller: it holds the
// Memcacheds (whole, but for other managers' managed-fields entries; see
// owned.KeepStatusManagerEntry) and, when namespaces is not empty, only those
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
	base.DefaultTransform = owned.KeepStatusManagerEntry
	// Informers that resume within seconds of an apiserver outage, not a
	// minute (package reconnect).
	base.NewInformer = reconnect.NewSharedIndexInformer
	if len(namespaces) > 0 {
		base.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			base.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return base
}
