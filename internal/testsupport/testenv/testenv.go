// Package testenv starts a real kube-apiserver (and etcd) for integration
// tests, with the Memcached CRD installed, using controller-runtime's envtest
// and the binaries that hack/build-cluster.sh builds into bin/k8s.
package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/pkg/operator"
)

// Scheme holds the built-in Kubernetes types, CustomResourceDefinitions and ours.
var Scheme = newScheme()

func newScheme() *k8sruntime.Scheme {
	s, err := operator.NewScheme()
	if err == nil {
		err = apiextensionsv1.AddToScheme(s)
	}
	if err != nil {
		panic(err)
	}
	return s
}

// Env is a running kube-apiserver with the Memcached CRD installed.
type Env struct {
	*envtest.Environment
	Config *rest.Config
	Client client.Client
}

// SharedKubeconfig names the environment variable that holds the path of a
// kubeconfig for an Env started by a parent test process. Start sets it for
// its children, so that the worker processes of `go test -fuzz` (which inherit
// the coordinator's environment and run TestMain again) share the
// coordinator's kube-apiserver rather than each starting, and leaving behind,
// their own.
const SharedKubeconfig = "MEMCACHED_TESTENV_KUBECONFIG"

// Start starts etcd and kube-apiserver from KUBEBUILDER_ASSETS (when unset,
// bin/k8s, or bin/k8s/$KUBE_VERSION for another version: repo.KubeBinDir) and installs the CRDs of manifests/crd/bases, and the Prometheus
// Operator's ServiceMonitor CRD (hack/crds). Stop it with Stop.
// When $MEMCACHED_TESTENV_KUBECONFIG is set, Start uses that apiserver
// instead, and Stop leaves it running.
func Start() (*Env, error) {
	if path := os.Getenv(SharedKubeconfig); path != "" {
		return attach(path)
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = repo.KubeBinDir()
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return nil, fmt.Errorf("control-plane binary %s not found in %s (run 'make k8s-binaries' with the same KUBE_VERSION): %w", b, assets, err)
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{repo.Path("manifests", "crd", "bases"), repo.Path("hack", "crds")},
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver: %w", err)
	}
	if err := repo.CheckServerVersion(cfg); err != nil {
		_ = env.Stop()
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating client: %w", err)
	}
	path := filepath.Join(env.ControlPlane.APIServer.CertDir, "shared.kubeconfig")
	if err := os.WriteFile(path, env.KubeConfig, 0o600); err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("writing the kubeconfig for child processes: %w", err)
	}
	if err := os.Setenv(SharedKubeconfig, path); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{Environment: env, Config: cfg, Client: c}, nil
}

// attach is Start for an apiserver that another process started and stops.
func attach(kubeconfig string) (*Env, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading $%s: %w", SharedKubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000 // as envtest's own: a test apiserver need not be spared
	env := &envtest.Environment{UseExistingCluster: ptr.To(true), Config: cfg, Scheme: Scheme}
	if _, err := env.Start(); err != nil {
		return nil, fmt.Errorf("attaching to the apiserver of $%s: %w", SharedKubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return &Env{Environment: env, Config: cfg, Client: c}, nil
}

// Run is a TestMain body: it starts an Env, runs the tests, stops the Env
// and exits. The Env is stored in *env for the tests.
func Run(m *testing.M, env **Env) {
	e, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping kube-apiserver:", err)
	}
	os.Exit(code)
}

// Namespace creates a namespace for one test, named after it, and deletes it
// when the test ends.
func Namespace(t testing.TB, c client.Client) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: strings.TrimRight(name, "-") + "-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	return ns.Name
}
