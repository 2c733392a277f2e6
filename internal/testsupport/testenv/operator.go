package testenv

import (
	"context"
	"os"
	"time"

	"go.uber.org/zap/zapcore"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/example/memcached-operator/pkg/controller/memcached"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/operator"
)

// SetLogger sends controller-runtime's logs to stderr: errors only, or
// everything when TEST_OPERATOR_LOGS is set.
func SetLogger() {
	level := zapcore.ErrorLevel
	if os.Getenv("TEST_OPERATOR_LOGS") != "" {
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(level)))
}

// DefaultImage is the memcached image of the operators tests start.
const DefaultImage = desired.DefaultImage

// ReloaderImage is the operator's image of the operators tests start: as in
// production, which passes the operator's own image, the pods run the
// reloader, the discovery endpoint and the warm runner, and the operator
// tells them of a new membership or new Secret content.
const ReloaderImage = "memcached-operator:latest"

// Images are the default images of the operators tests start.
var Images = desired.Images{Memcached: DefaultImage, Exporter: desired.DefaultExporterImage, Reloader: ReloaderImage}

// OperatorOptions tune an operator started by StartOperator.
type OperatorOptions struct {
	// SyncPeriod is the cache's resync interval (production's,
	// operator.DefaultSyncPeriod, when zero).
	SyncPeriod time.Duration
	// LeaderElectionNamespace, when set, turns leader election on with its
	// Lease in that namespace.
	LeaderElectionNamespace string
	// WatchNamespaces, when set, is --watch-namespaces.
	WatchNamespaces []string
	// TakeOver is --take-over.
	TakeOver bool
}

// StartOperator runs the operator in-process, set up as cmd/ sets it up, as
// the user of cfg. It runs until ctx is done; the returned channel then
// gives the manager's error.
func StartOperator(ctx context.Context, cfg *rest.Config, opts OperatorOptions) (<-chan error, error) {
	syncPeriod := opts.SyncPeriod
	if syncPeriod == 0 {
		syncPeriod = operator.DefaultSyncPeriod
	}
	mgr, err := operator.New(cfg, operator.Options{
		Manager: ctrl.Options{
			Metrics:                 metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress:  "0",
			LeaderElection:          opts.LeaderElectionNamespace != "",
			LeaderElectionNamespace: opts.LeaderElectionNamespace,
			// Several operators may run in one test binary, one after the other.
			Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		},
		Controller: memcached.Options{
			Images:                  Images,
			WatchNamespaces:         opts.WatchNamespaces,
			MaxConcurrentReconciles: 4,
			SyncPeriod:              syncPeriod,
			ReplacedManagers:        []string{memcached.DefaultReplacedManagers},
			TakeOver:                opts.TakeOver,
		},
	})
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return done, nil
}
