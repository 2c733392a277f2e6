//go:build e2e

// Package e2e is the end-to-end suite: each feature is a story a user of the
// operator lives through, told against a real cluster.
//
// The cluster, by E2E_PROVIDER:
//   - unset or "local": a local cluster (real control plane, kwok nodes)
//     created by e2e-framework's kwok provider with the binaries of bin/k8s;
//     the operator runs as a host process (bin/manager), since kwok pods run
//     no containers. Features labelled needs=containers are skipped here.
//   - "kind": a kind cluster (needs Docker); the operator image is built,
//     loaded and deployed from manifests/default.
//   - "existing": the cluster of --kubeconfig or $KUBECONFIG; the operator
//     runs as a host process unless E2E_OPERATOR_DEPLOYED=true.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
	"sigs.k8s.io/e2e-framework/support/kind"
	"sigs.k8s.io/e2e-framework/support/kwok"
)

var (
	testenv env.Environment
	// operator is the operator host process, nil when it runs in the cluster.
	operator *hostOperator
	// provider is the cluster provider in use: local, kind or existing.
	provider string
	// localCluster is the local cluster's name and kwokctl state folder
	// (provider local only).
	localCluster struct{ name, workdir string }
)

const operatorImage = "memcached-operator:e2e"

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..")
}

func TestMain(m *testing.M) {
	cfg, err := envconf.NewFromFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	provider = os.Getenv("E2E_PROVIDER")
	if provider == "" {
		provider = "local"
		if cfg.KubeconfigFile() != "" {
			provider = "existing"
		}
	}
	if provider != "kind" && !hasLabel(cfg.SkipLabels(), "needs", "containers") {
		// kwok pods run no containers: such features can only fail here.
		cfg.WithSkipLabels(mergeLabels(cfg.SkipLabels(), "needs", "containers"))
	}
	testenv = env.NewWithConfig(cfg)
	clusterName := envconf.RandomName("memcached-e2e", 20)
	crds := filepath.Join(repoRoot(), "manifests", "crd", "bases")

	switch provider {
	case "local":
		bin := filepath.Join(repoRoot(), "bin", "k8s")
		workdir, err := os.MkdirTemp("", "memcached-e2e-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer os.RemoveAll(workdir)
		localCluster.name, localCluster.workdir = clusterName, workdir
		// kwokctl reads its settings from the environment when the
		// provider runs it.
		for k, v := range map[string]string{
			"KWOK_WORKDIR":                        workdir,
			"KWOK_RUNTIME":                        "binary",
			"KWOK_KUBE_VERSION":                   "v1.37.2",
			"KWOK_KUBECTL_BINARY":                 filepath.Join(bin, "kubectl"),
			"KWOK_ETCD_BINARY":                    filepath.Join(bin, "etcd"),
			"KWOK_KUBE_APISERVER_BINARY":          filepath.Join(bin, "kube-apiserver"),
			"KWOK_KUBE_CONTROLLER_MANAGER_BINARY": filepath.Join(bin, "kube-controller-manager"),
			"KWOK_KUBE_SCHEDULER_BINARY":          filepath.Join(bin, "kube-scheduler"),
			"KWOK_CONTROLLER_BINARY":              filepath.Join(bin, "kwok"),
		} {
			os.Setenv(k, v)
		}
		testenv.Setup(
			envfuncs.CreateClusterWithOpts(kwok.NewProvider().WithPath(filepath.Join(bin, "kwokctl")), clusterName,
				kwok.WithWaitDuration(2*time.Minute)),
			addNodes(filepath.Join(bin, "kwokctl"), clusterName, 2),
			envfuncs.SetupCRDs(crds, "*"),
			startHostOperator,
		)
		testenv.Finish(
			stopHostOperator,
			envfuncs.DestroyCluster(clusterName),
		)
	case "kind":
		testenv.Setup(
			envfuncs.CreateCluster(kind.NewProvider(), clusterName),
			buildAndLoadImage(clusterName),
			deployOperator,
		)
		testenv.Finish(
			envfuncs.DestroyCluster(clusterName),
		)
	case "existing":
		if cfg.KubeconfigFile() == "" {
			cfg.WithKubeconfigFile(os.Getenv("KUBECONFIG"))
		}
		testenv.Setup(envfuncs.SetupCRDs(crds, "*"))
		if os.Getenv("E2E_OPERATOR_DEPLOYED") != "true" {
			testenv.Setup(startHostOperator)
			testenv.Finish(stopHostOperator)
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown E2E_PROVIDER %q: want local, kind or existing\n", provider)
		os.Exit(2)
	}
	os.Exit(testenv.Run(m))
}

func hasLabel(labels map[string][]string, key, value string) bool {
	for _, v := range labels[key] {
		if v == value {
			return true
		}
	}
	return false
}

func mergeLabels(labels map[string][]string, key, value string) map[string][]string {
	out := map[string][]string{}
	for k, v := range labels {
		out[k] = v
	}
	out[key] = append(out[key], value)
	return out
}

// addNodes adds fake nodes to the kwok cluster.
func addNodes(kwokctl, cluster string, n int) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		// Room for many pods: the default fake node allows 110.
		out, err := exec.CommandContext(ctx, kwokctl, "scale", "node", "--replicas", fmt.Sprint(n), "--name", cluster,
			"--param", ".allocatable.pods=5000", "--param", ".allocatable.cpu=1000", "--param", `.allocatable.memory="4Ti"`).CombinedOutput()
		if err != nil {
			return ctx, fmt.Errorf("adding nodes: %w: %s", err, out)
		}
		return ctx, nil
	}
}

// buildAndLoadImage builds the operator image with Docker and loads it into kind.
func buildAndLoadImage(cluster string) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		cmd := exec.CommandContext(ctx, "docker", "build", "-t", operatorImage, repoRoot())
		if out, err := cmd.CombinedOutput(); err != nil {
			return ctx, fmt.Errorf("docker build: %w: %s", err, out)
		}
		return envfuncs.LoadImageToCluster(cluster, operatorImage)(ctx, cfg)
	}
}

// deployOperator installs manifests/default with the e2e image and waits for the manager.
func deployOperator(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	bundle, err := kubectl(ctx, cfg, "", "kustomize", filepath.Join(repoRoot(), "manifests", "default"))
	if err != nil {
		return ctx, err
	}
	bundle = strings.ReplaceAll(bundle, "image: memcached-operator:latest", "image: "+operatorImage)
	if _, err := kubectl(ctx, cfg, bundle, "apply", "--server-side", "-f", "-"); err != nil {
		return ctx, err
	}
	_, err = kubectl(ctx, cfg, "", "wait", "-n", "memcached-operator-system", "--for=condition=Available",
		"--timeout=3m", "deployment/memcached-operator-controller-manager")
	return ctx, err
}

// kubectl runs kubectl (bin/k8s/kubectl, else the one on PATH) on the test cluster.
func kubectl(ctx context.Context, cfg *envconf.Config, stdin string, args ...string) (string, error) {
	path := filepath.Join(repoRoot(), "bin", "k8s", "kubectl")
	if _, err := os.Stat(path); err != nil {
		path = "kubectl"
	}
	cmd := exec.CommandContext(ctx, path, append([]string{"--kubeconfig", cfg.KubeconfigFile()}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
