// Command manager runs the memcached-operator: the Memcached controller in a
// controller-runtime manager.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/example/memcached-operator/pkg/controller/memcached"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/golimit"
	"github.com/example/memcached-operator/pkg/operator"
)

// settings are the operator's command line, with the environment's
// defaults.
type settings struct {
	metricsAddr             string
	secureMetrics           bool
	enableHTTP2             bool
	probeAddr               string
	pprofAddr               string
	leaderElect             bool
	leaderElectionNamespace string
	defaultImage            string
	exporterImage           string
	reloaderImage           string
	maxConcurrentReconciles int
	syncPeriod              time.Duration
	autoscaleInterval       time.Duration
	qps                     float64
	burst                   int
	watchNamespaces         string
	replacedManagers        string
	takeOver                bool
	zap                     zap.Options
}

// parseSettings reads the command line args (without the program's name),
// with getenv's variables as the defaults of the image flags.
func parseSettings(args []string, getenv func(string) string) (settings, error) {
	var s settings
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.StringVar(&s.metricsAddr, "metrics-bind-address", ":8443", "Address of the metrics endpoint; 0 disables it.")
	fs.BoolVar(&s.secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS, to callers authenticated and authorized by the apiserver.")
	fs.BoolVar(&s.enableHTTP2, "enable-http2", false, "Allow HTTP/2 on the metrics server (off: HTTP/2 stream cancellation and rapid reset CVEs).")
	fs.StringVar(&s.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	fs.StringVar(&s.pprofAddr, "pprof-bind-address", "0", "Address of the pprof endpoints (/debug/pprof); 0 disables them.")
	fs.BoolVar(&s.leaderElect, "leader-elect", false, "Elect a leader, so that of several replicas only one reconciles.")
	fs.StringVar(&s.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the pod's namespace).")
	fs.StringVar(&s.defaultImage, "memcached-image", imageDefault(getenv, "MEMCACHED_IMAGE", desired.DefaultImage), "Memcached image for Memcacheds without spec.image (default: $MEMCACHED_IMAGE, else "+desired.DefaultImage+").")
	fs.StringVar(&s.exporterImage, "exporter-image", imageDefault(getenv, "EXPORTER_IMAGE", desired.DefaultExporterImage), "Prometheus memcached exporter image of Memcacheds with spec.monitoring enabled (default: $EXPORTER_IMAGE, else "+desired.DefaultExporterImage+").")
	fs.StringVar(&s.reloaderImage, "reloader-image", getenv("RELOADER_IMAGE"), "The operator's image, which the pods take the reloader (TLS or authentication loaded without a restart), the discovery endpoint and the warm runner (memcached restarted with its cache) from (default: $RELOADER_IMAGE, else the operator's own image when it runs in a pod that sets POD_NAME and POD_NAMESPACE; none: new Secret content restarts the pods, no discovery endpoint, memcached restarts empty).")
	fs.IntVar(&s.maxConcurrentReconciles, "max-concurrent-reconciles", 4, "Number of Memcacheds reconciled at once.")
	fs.DurationVar(&s.syncPeriod, "sync-period", operator.DefaultSyncPeriod, "Interval at which every cached object is reconciled again.")
	fs.DurationVar(&s.autoscaleInterval, "autoscale-interval", memcached.DefaultAutoscaleInterval, "How often the pods of the Memcacheds with spec.autoscaling are read (HTTP, port 11213 of each pod; no apiserver request).")
	fs.Float64Var(&s.qps, "kube-api-qps", 50, "Requests per second the operator may send to the apiserver, sustained.")
	fs.IntVar(&s.burst, "kube-api-burst", 100, "Requests the operator may send to the apiserver in a burst.")
	fs.StringVar(&s.replacedManagers, "replaced-field-managers", memcached.DefaultReplacedManagers, "Comma-separated field managers of the operator this one replaces: their Update entries in a Memcached's status become the operator's when it replaces a Deployment it did not make.")
	fs.BoolVar(&s.takeOver, "take-over", envBool(getenv, "TAKE_OVER"), "Replace the Deployments of the Operator SDK tutorial's operator (those selecting a Memcached's pods by other labels), which needs the takeover role (manifests/takeover) (default: $TAKE_OVER, else false: such a Deployment is left alone and the Memcached's status says why).")
	fs.StringVar(&s.watchNamespaces, "watch-namespaces", "", "Comma-separated namespaces whose Memcacheds the operator caches and reconciles; empty: all namespaces.")
	s.zap.BindFlags(fs)
	// What packages register on the process' flags: controller-runtime's
	// --kubeconfig, which ctrl.GetConfigOrDie reads.
	flag.CommandLine.VisitAll(func(f *flag.Flag) {
		if fs.Lookup(f.Name) == nil {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	if strings.TrimSpace(s.defaultImage) == "" {
		return s, errors.New("the default memcached image is empty: set --memcached-image or MEMCACHED_IMAGE")
	}
	if strings.TrimSpace(s.exporterImage) == "" {
		return s, errors.New("the exporter image is empty: set --exporter-image or EXPORTER_IMAGE")
	}
	return s, nil
}

func main() {
	s, err := parseSettings(os.Args[1:], os.Getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	zapOpts := s.zap
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts), zap.RawZapOpts(uberzap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return lazyFields{c}
	}))))
	log := ctrl.Log.WithName("setup")

	// Near the container's memory limit the Go runtime collects harder
	// rather than letting the kernel kill the process: golimit.Ratio of the
	// cgroup limit (GOMEMLIMIT, or AUTOMEMLIMIT=ratio|off, overrides it).
	if limit, err := memlimit.Set(memlimit.WithRatio(golimit.Ratio)); err != nil {
		log.Info("No memory limit for the Go runtime", "reason", err.Error())
	} else if limit < math.MaxInt64 {
		log.Info("Go runtime memory limit", "bytes", limit)
	}

	namespaces, err := parseNamespaces(s.watchNamespaces)
	if err != nil {
		log.Error(err, "Invalid --watch-namespaces")
		os.Exit(1)
	}

	var tlsOpts []func(*tls.Config)
	if !s.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{BindAddress: s.metricsAddr, SecureServing: s.secureMetrics, TLSOpts: tlsOpts}
	if s.secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	restConfig := ctrl.GetConfigOrDie()
	restConfig.QPS, restConfig.Burst = float32(s.qps), s.burst
	if s.reloaderImage == "" {
		s.reloaderImage = ownImage(restConfig, os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME"), log)
	}
	mgr, err := operator.New(restConfig, operator.Options{
		Manager: ctrl.Options{
			Metrics:                 metricsOpts,
			HealthProbeBindAddress:  s.probeAddr,
			PprofBindAddress:        s.pprofAddr,
			LeaderElection:          s.leaderElect,
			LeaderElectionNamespace: s.leaderElectionNamespace,
		},
		Controller: memcached.Options{
			Images:                  desired.Images{Memcached: s.defaultImage, Exporter: s.exporterImage, Reloader: s.reloaderImage},
			WatchNamespaces:         namespaces,
			MaxConcurrentReconciles: s.maxConcurrentReconciles,
			SyncPeriod:              s.syncPeriod,
			AutoscaleInterval:       s.autoscaleInterval,
			ReplacedManagers:        splitList(s.replacedManagers),
			TakeOver:                s.takeOver,
		},
	})
	if err != nil {
		log.Error(err, "Unable to set up the operator")
		os.Exit(1)
	}

	log.Info("Starting the manager", "defaultImage", s.defaultImage, "exporterImage", s.exporterImage, "reloaderImage", s.reloaderImage, "maxConcurrentReconciles", s.maxConcurrentReconciles, "leaderElect", s.leaderElect, "watchNamespaces", namespaces, "takeOver", s.takeOver)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "The manager stopped with an error")
		os.Exit(1)
	}
}

// envBool is true when getenv's variable env says true (as
// strconv.ParseBool reads it): how OLM's Subscription config, which sets
// environment variables only, turns a flag on.
func envBool(getenv func(string) string, env string) bool {
	b, err := strconv.ParseBool(getenv(env))
	return err == nil && b
}

// imageDefault is the default of an image flag: the environment variable
// env when set (MEMCACHED_IMAGE, as the tutorial operator reads it), else
// image.
func imageDefault(getenv func(string) string, env, image string) string {
	if v := getenv(env); v != "" {
		return v
	}
	return image
}

// parseNamespaces reads --watch-namespaces: namespace names separated by
// commas, spaces around them ignored, each at most once.
func parseNamespaces(list string) ([]string, error) {
	var namespaces []string
	for _, ns := range strings.Split(list, ",") {
		ns = strings.TrimSpace(ns)
		if ns == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
		}
		if !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	return namespaces, nil
}

// splitList reads a comma-separated list, spaces around items ignored,
// empty items dropped.
func splitList(list string) []string {
	var out []string
	for _, item := range strings.Split(list, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// managerContainer is the operator's container in its pod (manifests/manager).
const managerContainer = "manager"

// ownImage is the image of the operator's own container, which holds the
// reloader, read once from its pod (namespace, name: the downward API's);
// empty, and said why, when it cannot be. Then pods restart on new Secret
// content, as they did before the reloader.
func ownImage(cfg *rest.Config, namespace, name string, log logr.Logger) string {
	if namespace == "" || name == "" {
		log.Info("No reloader image: neither --reloader-image nor POD_NAME and POD_NAMESPACE are set; new Secret content will restart the pods, and memcached restarts empty")
		return ""
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var pod *corev1.Pod
		if pod, err = cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
			for _, c := range pod.Spec.Containers {
				if c.Name == managerContainer {
					return c.Image
				}
			}
			err = fmt.Errorf("pod %s/%s has no container %s", namespace, name, managerContainer)
		}
	}
	log.Error(err, "Cannot read the operator's own image for the reloader; set --reloader-image. New Secret content will restart the pods, and memcached restarts empty")
	return ""
}
