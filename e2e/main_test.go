//go:build e2e

// Package e2e is the end-to-end suite: each feature is a story a user of the
// operator lives through, told against a real cluster.
//
// The cluster, by E2E_PROVIDER:
//   - unset or "local": a local cluster (hack/cluster.sh: real control plane,
//     two kwok nodes) plus a real node (hack/node.sh: kubelet, containerd,
//     kube-proxy, CoreDNS) whose pods run containers from the images of
//     hack/images.sh. The real node is tainted: only the features labelled
//     needs=containers place pods there. The operator runs as a host process
//     (bin/manager), but for the feature that deploys it from
//     manifests/default. E2E_REAL_NODE=0 leaves the real node out and skips
//     the needs=containers features (for machines where it cannot run: it
//     needs root).
//   - "kind": a kind cluster (needs Docker); the operator image is built,
//     loaded and deployed from manifests/default.
//   - "existing": the cluster of --kubeconfig or $KUBECONFIG; the operator
//     runs as a host process unless E2E_OPERATOR_DEPLOYED=true; the
//     needs=containers features run only with E2E_CONTAINERS=true.
//
// A story that touches nothing but its own namespaces, and measures
// nothing of the operator's process (its requests, its memory), calls
// t.Parallel: those run after every other story, as many at once as
// go test's -parallel allows (hack/test.sh sets it), since they mostly wait
// on the real node and the apiserver. The others run one at a time and
// alone: those that stop, kill or stand aside the host operator, stop a
// component of the cluster, count the operator's requests or memory, or
// load the node on purpose (a flood; a client timing every pod's answers).
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
	"sigs.k8s.io/e2e-framework/support/kind"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/localcluster"
	"github.com/example/memcached-operator/internal/testsupport/repo"
)

var (
	testenv env.Environment
	// operator is the operator host process, nil when it runs in the cluster.
	operator *hostOperator
	// provider is the cluster provider in use: local, kind or existing.
	provider string
	// localCluster is the local cluster (provider local only).
	localCluster *localcluster.Cluster
)

// realNodeTaint keeps every pod but those of the needs=containers features
// off the real node: the other features run on kwok's nodes, with images no
// node could pull.
const realNodeTaint = "memcached-operator.example.com/real-node"

const operatorImage = "memcached-operator:e2e"

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
	if provider == "existing" && os.Getenv("E2E_CONTAINERS") != "true" && !hasLabel(cfg.SkipLabels(), "needs", "containers") {
		// Pods of an unknown cluster may run no containers (kwok), nor have
		// the real node's images: such features run only when asked for.
		cfg.WithSkipLabels(mergeLabels(cfg.SkipLabels(), "needs", "containers"))
	}
	testenv = env.NewWithConfig(cfg)
	clusterName := envconf.RandomName("memcached-e2e", 20)
	crds := filepath.Join(repo.Root(), "manifests", "crd", "bases")

	switch provider {
	case "local":
		realNode := os.Getenv("E2E_REAL_NODE") != "0"
		if !realNode {
			fmt.Println("E2E_REAL_NODE=0: features labelled needs=containers are skipped")
			cfg.WithSkipLabels(mergeLabels(cfg.SkipLabels(), "needs", "containers"))
		}
		testenv.Setup(
			createLocalCluster(clusterName, realNode),
			envfuncs.SetupCRDs(crds, "*"),
			memcachedsServed,
			startHostOperator,
		)
		testenv.Finish(
			stopHostOperator,
			deleteLocalCluster,
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
		testenv.Setup(envfuncs.SetupCRDs(crds, "*"), memcachedsServed)
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

// memcachedsServed waits until API discovery lists Memcacheds: a CRD is
// Established a moment before discovery serves it, and a client whose
// first discovery falls in that moment cannot create one.
func memcachedsServed(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg.Client().RESTConfig())
	if err != nil {
		return ctx, err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		resources, err := dc.ServerResourcesForGroupVersion(cachev1alpha1.SchemeGroupVersion.String())
		if err != nil {
			return false, nil
		}
		return slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == "memcacheds" }), nil
	})
	if err != nil {
		return ctx, fmt.Errorf("waiting for discovery to serve Memcacheds: %w", err)
	}
	return ctx, nil
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

// createLocalCluster creates the local cluster (hack/cluster.sh): two kwok
// nodes and, unless E2E_REAL_NODE=0, a real node tainted with realNodeTaint.
func createLocalCluster(name string, realNode bool) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		opts := localcluster.Options{FakeNodes: 2}
		if realNode {
			opts.RealNode, opts.RealNodeTaints = true, realNodeTaint+"=true:NoSchedule"
		}
		c, err := localcluster.Create(ctx, name, opts)
		if err != nil {
			return ctx, err
		}
		localCluster = c
		cfg.WithKubeconfigFile(c.Kubeconfig)
		return ctx, nil
	}
}

func deleteLocalCluster(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	if localCluster == nil {
		return ctx, nil
	}
	return ctx, localCluster.Delete(ctx)
}

// buildAndLoadImage builds the operator image with Docker and loads it into kind.
func buildAndLoadImage(cluster string) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		cmd := exec.CommandContext(ctx, "docker", "build", "-t", operatorImage, repo.Root())
		if out, err := cmd.CombinedOutput(); err != nil {
			return ctx, fmt.Errorf("docker build: %w: %s", err, out)
		}
		return envfuncs.LoadImageToCluster(cluster, operatorImage)(ctx, cfg)
	}
}

// deployOperator installs manifests/default with the e2e image (on the local
// cluster: the one hack/images.sh built from the Dockerfile's last stage, on the
// real node) and waits for the manager.
func deployOperator(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	// An overlay of manifests/default: the image, and on the local cluster
	// the real node (the only one that runs containers, and tainted).
	overlay, err := os.MkdirTemp("", "memcached-e2e-deploy-")
	if err != nil {
		return ctx, err
	}
	defer os.RemoveAll(overlay)
	base, err := filepath.Rel(overlay, filepath.Join(repo.Root(), "manifests", "default")) // kustomize takes no absolute path
	if err != nil {
		return ctx, err
	}
	kustomization := fmt.Sprintf(`resources:
- %s
images:
- name: memcached-operator
  newName: %s
  newTag: %s
`, base, strings.Split(operatorImage, ":")[0], strings.Split(operatorImage, ":")[1])
	if provider == "local" {
		kustomization += fmt.Sprintf(`patches:
- target: {kind: Deployment, name: memcached-operator-controller-manager}
  patch: |
    {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"memcached-operator-controller-manager","namespace":"memcached-operator-system"},
     "spec":{"template":{"spec":{"nodeSelector":{%q:"true"},"tolerations":[{"key":%q,"operator":"Exists","effect":"NoSchedule"}]}}}}
`, realNodeLabel, realNodeTaint)
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return ctx, err
	}
	bundle, err := kubectl(ctx, cfg, "", "kustomize", overlay)
	if err != nil {
		return ctx, err
	}
	if _, err := kubectl(ctx, cfg, bundle, "apply", "--server-side", "-f", "-"); err != nil {
		return ctx, err
	}
	if out, err := kubectl(ctx, cfg, "", "rollout", "status", "-n", "memcached-operator-system",
		"--timeout=3m", "deployment/memcached-operator-controller-manager"); err != nil {
		pods, _ := kubectl(ctx, cfg, "", "get", "pods", "-n", "memcached-operator-system", "-o", "wide")
		return ctx, fmt.Errorf("%w\n%s\n%s", err, out, pods)
	}
	return ctx, nil
}

// kubectl runs kubectl (bin/k8s/kubectl, else the one on PATH) on the test cluster.
func kubectl(ctx context.Context, cfg *envconf.Config, stdin string, args ...string) (string, error) {
	return repo.Kubectl(ctx, cfg.KubeconfigFile(), []byte(stdin), args...)
}
