// Package operator builds the operator's manager: the one cmd/ runs, and
// the one tests and the benchmark start in-process, set up alike.
package operator

import (
	"fmt"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/controller/memcached"
)

// LeaderElectionID names the Lease that replicas of the operator elect
// their leader with.
const LeaderElectionID = "memcached-operator.cache.example.com"

// DefaultSyncPeriod is how often the operator reconciles every Memcached
// though nothing changed, unless told otherwise (--sync-period): a safety
// net, not how it learns of changes. The tests run it so too.
const DefaultSyncPeriod = 10 * time.Hour

// Options configure the operator.
type Options struct {
	// Manager holds the manager's own settings: metrics, probes, pprof,
	// leader election on or off and its namespace. New sets its scheme,
	// cache and leader election ID.
	Manager ctrl.Options
	// Controller configures the Memcached controller; its SyncPeriod is the
	// manager cache's too.
	Controller memcached.Options
}

// NewScheme holds the built-in Kubernetes types and ours.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("registering the built-in types: %w", err)
	}
	if err := cachev1alpha1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("registering the Memcached types: %w", err)
	}
	if err := monitoringv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("registering the ServiceMonitor types: %w", err)
	}
	return s, nil
}

// New returns the operator's manager, not started: the Memcached
// controller, the store of what it owns, and health and ready checks.
func New(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	mo := o.Manager
	mo.Scheme = scheme
	mo.LeaderElectionID = LeaderElectionID
	mo.LeaderElectionReleaseOnCancel = true
	mo.Cache = memcached.CacheOptions(cache.Options{SyncPeriod: &o.Controller.SyncPeriod}, o.Controller.WatchNamespaces)
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := memcached.Setup(mgr, o.Controller); err != nil {
		return nil, fmt.Errorf("setting up the Memcached controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("setting up the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("setting up the ready check: %w", err)
	}
	return mgr, nil
}
