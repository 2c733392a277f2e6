//go:build integration

package manifests_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

const (
	release          = "mco"
	releaseNamespace = "mco-system"
)

var chartDir = repo.Path("manifests", "charts", "memcached-operator")

// helm runs bin/helm (`make helm`) on the test cluster.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	path := repo.Path("bin", "helm")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing: run 'make helm'", path)
	}
	cmd := exec.Command(path, append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func mustHelm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// valueSets are the chart's values the tests render: the defaults, and
// every switch the chart has turned the other way.
var valueSets = map[string][]string{
	"defaults":             nil,
	"namespaced":           {"--set", "watchNamespaces={mco-watched-a,mco-watched-b}"},
	"service monitor":      {"--set", "metrics.serviceMonitor.enabled=true"},
	"alerts and dashboard": {"--set", "alerts.enabled=true", "--set", "dashboard.enabled=true"},
	"no metrics":           {"--set", "metrics.enabled=false"},
	"plain metrics":        {"--set", "metrics.secure=false", "--set", "networkPolicy.enabled=false"},
	"takeover":             {"--set", "takeover.enabled=true"},
	"takeover, namespaced": {"--set", "takeover.enabled=true", "--set", "watchNamespaces={mco-watched-a,mco-watched-b}"},
	"no leader election, scheduling and more": {
		"--set", "leaderElection.enabled=false", "--set", "replicaCount=1",
		"--set", "nodeSelector.disk=ssd", "--set", "tolerations[0].key=dedicated", "--set", "tolerations[0].operator=Exists",
		"--set", "priorityClassName=system-cluster-critical", "--set", "imagePullSecrets[0].name=registry",
		"--set", "podAnnotations.example\\.com/team=cache", "--set", "exporterImage=exporter:v1",
		"--set", "extraArgs={--max-concurrent-reconciles=8}", "--set", "image.tag=v9",
	},
}

// TestHelmChartLintsAndPassesServerSideDryRun lints the chart and applies
// what it renders, for each value set, as a server-side dry run.
func TestHelmChartLintsAndPassesServerSideDryRun(t *testing.T) {
	for _, ns := range []string{releaseNamespace, "mco-watched-a", "mco-watched-b"} {
		if out, err := kubectl(t, nil, "create", "namespace", ns); err != nil && !strings.Contains(out, "AlreadyExists") {
			t.Fatal(err)
		}
	}
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			mustHelm(t, append([]string{"lint", "--strict", chartDir}, values...)...)
			rendered := mustHelm(t, append([]string{"template", release, chartDir, "--namespace", releaseNamespace, "--include-crds"}, values...)...)
			if out, err := kubectl(t, []byte(rendered), "apply", "--server-side", "--dry-run=server", "--field-manager=helm-test", "-f", "-"); err != nil {
				t.Fatalf("server-side dry run: %v\n%s\nrendered:\n%s", err, out, rendered)
			}
		})
	}
}

// The takeover from the tutorial's operator is opt-in: by default the
// chart grants none of its permissions and passes no --take-over; enabled,
// it grants them cluster-wide, or in the watched namespaces only.
func TestHelmTakeOverIsOptIn(t *testing.T) {
	g := NewWithT(t)
	// objects are the kind/name[/namespace] of what the chart renders.
	objects := func(values ...string) []string {
		rendered := mustHelm(t, append([]string{"template", release, chartDir, "--namespace", releaseNamespace}, values...)...)
		var out []string
		for _, doc := range strings.Split(rendered, "\n---") {
			var o struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"metadata"`
			}
			if err := sigsyaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("%v\n%s", err, doc)
			}
			if o.Kind != "" {
				out = append(out, strings.TrimSuffix(o.Kind+"/"+o.Metadata.Name+"/"+o.Metadata.Namespace, "/"))
			}
		}
		return out
	}
	args := func(values ...string) string {
		return mustHelm(t, append([]string{"template", release, chartDir, "--namespace", releaseNamespace, "--show-only", "templates/deployment-controller-manager.yaml"}, values...)...)
	}
	takeover := release + "-takeover"
	g.Expect(objects()).NotTo(ContainElement(ContainSubstring("takeover")))
	g.Expect(args()).NotTo(ContainSubstring("--take-over"))

	g.Expect(objects("--set", "takeover.enabled=true")).To(ContainElements("ClusterRole/"+takeover, "ClusterRoleBinding/"+takeover))
	g.Expect(args("--set", "takeover.enabled=true")).To(ContainSubstring("- --take-over\n"))

	namespaced := objects("--set", "takeover.enabled=true", "--set", "watchNamespaces={mco-watched-a,mco-watched-b}")
	g.Expect(namespaced).To(ContainElements("ClusterRole/"+takeover, "RoleBinding/"+takeover+"/mco-watched-a", "RoleBinding/"+takeover+"/mco-watched-b"))
	g.Expect(namespaced).NotTo(ContainElement("ClusterRoleBinding/" + takeover))
}

// TestHelmInstallUpgradeUninstall installs the chart for real, runs the
// operator as the chart's ServiceAccount through a Memcached's life,
// upgrades the release to watch one namespace (the cluster-wide role goes,
// a Role comes), runs the operator there, and uninstalls: nothing of the
// release is left but the CRD, as Helm leaves CRDs.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	mustHelm(t, "install", release, chartDir, "--namespace", releaseNamespace, "--create-namespace", "--wait", "--timeout", "2m")
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			_, _ = helm(t, "uninstall", release, "--namespace", releaseNamespace)
		}
	})

	dep := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: release + "-controller-manager"}, dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Spec.ServiceAccountName).To(Equal(release + "-controller-manager"))
	g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal("memcached-operator:" + repo.Version("OPERATOR_VERSION")))
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: release + "-manager"}, &rbacv1.ClusterRole{})).To(Succeed())

	sa := func(t *testing.T) *rest.Config {
		return serviceAccountConfigFor(t, releaseNamespace, release+"-controller-manager")
	}

	t.Run("cluster-wide", func(t *testing.T) {
		startOperator(t, sa(t), testenv.OperatorOptions{LeaderElectionNamespace: releaseNamespace})
		lifecycle(t)
	})

	watched := testenv.Namespace(t, k8s)
	mustHelm(t, "upgrade", release, chartDir, "--namespace", releaseNamespace, "--set", "watchNamespaces={"+watched+"}", "--wait", "--timeout", "2m")
	for _, obj := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: release + "-manager"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: release + "-manager"}},
	} {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the upgrade removes %T %s: %v", obj, obj.GetName(), err)
	}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: watched, Name: release + "-manager"}, &rbacv1.Role{})).To(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--watch-namespaces=" + watched))

	t.Run("namespaced", func(t *testing.T) {
		g := NewWithT(t)
		startOperator(t, sa(t), testenv.OperatorOptions{LeaderElectionNamespace: releaseNamespace, WatchNamespaces: []string{watched}})
		m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: watched}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}}
		g.Expect(k8s.Create(ctx, m)).To(Succeed())
		available(t, client.ObjectKeyFromObject(m), 2)
	})

	mustHelm(t, "uninstall", release, "--namespace", releaseNamespace, "--wait", "--timeout", "2m")
	uninstalled = true
	selector := client.MatchingLabels{"app.kubernetes.io/instance": release}
	for _, list := range []client.ObjectList{
		&appsv1.DeploymentList{}, &corev1.ServiceAccountList{}, &corev1.ServiceList{},
		&rbacv1.RoleList{}, &rbacv1.RoleBindingList{}, &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{},
		&networkingv1.NetworkPolicyList{}, &monitoringv1.ServiceMonitorList{},
	} {
		g.Expect(k8s.List(ctx, list, selector)).To(Succeed())
		g.Expect(meta.LenList(list)).To(BeZero(), "%T left after uninstall", list)
	}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "memcacheds.cache.example.com"}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed(), "Helm keeps the CRD")
}
