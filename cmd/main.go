// Command manager runs the memcached-operator: the Memcached controller in a
// controller-runtime manager.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
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

func main() {
	var (
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
		qps                     float64
		burst                   int
		watchNamespaces         string
		replacedManagers        string
	)
	envImage := imageDefault(os.Getenv, "MEMCACHED_IMAGE", desired.DefaultImage)
	envExporterImage := imageDefault(os.Getenv, "EXPORTER_IMAGE", desired.DefaultExporterImage)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "Address of the metrics endpoint; 0 disables it.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS, to callers authenticated and authorized by the apiserver.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false, "Allow HTTP/2 on the metrics server (off: HTTP/2 stream cancellation and rapid reset CVEs).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "0", "Address of the pprof endpoints (/debug/pprof); 0 disables them.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader, so that of several replicas only one reconciles.")
	flag.StringVar(&leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the pod's namespace).")
	flag.StringVar(&defaultImage, "memcached-image", envImage, "Memcached image for Memcacheds without spec.image (default: $MEMCACHED_IMAGE, else "+desired.DefaultImage+").")
	flag.StringVar(&exporterImage, "exporter-image", envExporterImage, "Prometheus memcached exporter image of Memcacheds with spec.monitoring enabled (default: $EXPORTER_IMAGE, else "+desired.DefaultExporterImage+").")
	flag.StringVar(&reloaderImage, "reloader-image", os.Getenv("RELOADER_IMAGE"), "Image of the reloader that pods with TLS or authentication run to load new Secret content without a restart (default: $RELOADER_IMAGE, else the operator's own image when it runs in a pod that sets POD_NAME and POD_NAMESPACE; none: new content restarts the pods).")
	flag.IntVar(&maxConcurrentReconciles, "max-concurrent-reconciles", 4, "Number of Memcacheds reconciled at once.")
	flag.DurationVar(&syncPeriod, "sync-period", operator.DefaultSyncPeriod, "Interval at which every cached object is reconciled again.")
	flag.Float64Var(&qps, "kube-api-qps", 50, "Requests per second the operator may send to the apiserver, sustained.")
	flag.IntVar(&burst, "kube-api-burst", 100, "Requests the operator may send to the apiserver in a burst.")
	flag.StringVar(&replacedManagers, "replaced-field-managers", memcached.DefaultReplacedManagers, "Comma-separated field managers of the operator this one replaces: their Update entries in a Memcached's status become the operator's when it replaces a Deployment it did not make.")
	flag.StringVar(&watchNamespaces, "watch-namespaces", "", "Comma-separated namespaces whose Memcacheds the operator caches and reconciles; empty: all namespaces.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()

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

	if strings.TrimSpace(defaultImage) == "" {
		log.Error(nil, "The default memcached image is empty: set --memcached-image or MEMCACHED_IMAGE")
		os.Exit(1)
	}
	if strings.TrimSpace(exporterImage) == "" {
		log.Error(nil, "The exporter image is empty: set --exporter-image or EXPORTER_IMAGE")
		os.Exit(1)
	}

	namespaces, err := parseNamespaces(watchNamespaces)
	if err != nil {
		log.Error(err, "Invalid --watch-namespaces")
		os.Exit(1)
	}

	var tlsOpts []func(*tls.Config)
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: secureMetrics, TLSOpts: tlsOpts}
	if secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	restConfig := ctrl.GetConfigOrDie()
	restConfig.QPS, restConfig.Burst = float32(qps), burst
	if reloaderImage == "" {
		reloaderImage = ownImage(restConfig, os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME"), log)
	}
	mgr, err := operator.New(restConfig, operator.Options{
		Manager: ctrl.Options{
			Metrics:                 metricsOpts,
			HealthProbeBindAddress:  probeAddr,
			PprofBindAddress:        pprofAddr,
			LeaderElection:          leaderElect,
			LeaderElectionNamespace: leaderElectionNamespace,
		},
		Controller: memcached.Options{
			Images:                  desired.Images{Memcached: defaultImage, Exporter: exporterImage, Reloader: reloaderImage},
			WatchNamespaces:         namespaces,
			MaxConcurrentReconciles: maxConcurrentReconciles,
			SyncPeriod:              syncPeriod,
			ReplacedManagers:        splitList(replacedManagers),
		},
	})
	if err != nil {
		log.Error(err, "Unable to set up the operator")
		os.Exit(1)
	}

	log.Info("Starting the manager", "defaultImage", defaultImage, "exporterImage", exporterImage, "reloaderImage", reloaderImage, "maxConcurrentReconciles", maxConcurrentReconciles, "leaderElect", leaderElect, "watchNamespaces", namespaces)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "The manager stopped with an error")
		os.Exit(1)
	}
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
		log.Info("No reloader image: neither --reloader-image nor POD_NAME and POD_NAMESPACE are set; new Secret content will restart the pods")
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
	log.Error(err, "Cannot read the operator's own image for the reloader; set --reloader-image. New Secret content will restart the pods")
	return ""
}
