//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/olm"
	"github.com/example/memcached-operator/internal/testsupport/repo"
)

// servesOnly creates a Memcached on the real node in each of watched and
// other, and asserts that the operator serves the first and leaves the
// second alone: no status, no Deployment.
func servesOnly(t *testing.T, c client.Client, watched, other string) {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	outside := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "cache"}, Spec: onRealNode(1)}
	g.Expect(c.Create(ctx, outside)).To(Succeed())
	inside := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: watched, Name: "cache"}, Spec: onRealNode(1)}
	g.Expect(c.Create(ctx, inside)).To(Succeed())
	converged(t, c, client.ObjectKeyFromObject(inside), 1)
	got := &cachev1alpha1.Memcached{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(outside), got)).To(Succeed())
	g.Expect(got.Status.Conditions).To(BeEmpty(), "a Memcached outside the watched namespaces has no status")
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(outside), &appsv1.StatefulSet{})).NotTo(Succeed(), "nor a StatefulSet")
}

// The Helm chart, installed with Helm built from its Go module, runs the
// operator's image on the real node, scoped by the chart's watchNamespaces:
// it serves a Memcached in the watched namespace and leaves one outside it
// alone.
func TestHelmChartRunsTheOperator(t *testing.T) {
	const release, system = "e2e", "memcached-operator-helm"
	var watched, other string
	f := features.New("the Helm chart runs the operator").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("kind deploys the operator in the cluster for the whole suite")
			}
			start := time.Now()
			builtBeside(t, "helm")
			t.Logf("waited %s for Helm's build", time.Since(start).Round(time.Second))
			watched, other = namespace(t, cfg, "helm-watched"), namespace(t, cfg, "helm-other")
			helm := func(args ...string) (string, error) {
				cmd := exec.CommandContext(context.Background(), repo.Path("bin", "helm"), append([]string{"--kubeconfig", cfg.KubeconfigFile()}, args...)...)
				cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			hostOperatorStandsAside(t, cfg, func() {
				if out, err := helm("uninstall", release, "--namespace", system, "--wait", "--timeout", "2m"); err != nil {
					t.Errorf("helm uninstall: %v\n%s", err, out)
				}
				_, _ = kubectl(context.Background(), cfg, "", "delete", "namespace", system, "--wait=false")
			})
			repository, tag, _ := strings.Cut(operatorImage, ":")
			values := fmt.Sprintf(`image: {repository: %s, tag: %s, pullPolicy: Never}
watchNamespaces: [%s]
nodeSelector: {%q: "true"}
tolerations: [{key: %q, operator: Exists, effect: NoSchedule}]
`, repository, tag, watched, realNodeLabel, realNodeTaint)
			file := filepath.Join(t.TempDir(), "values.yaml")
			NewWithT(t).Expect(os.WriteFile(file, []byte(values), 0o644)).To(Succeed())
			start = time.Now()
			out, err := helm("install", release, repo.Path("manifests", "charts", "memcached-operator"),
				"--namespace", system, "--create-namespace", "--values", file, "--wait", "--timeout", "3m")
			if err != nil {
				pods, _ := kubectl(ctx, cfg, "", "get", "pods", "-n", system, "-o", "wide")
				t.Fatalf("helm install: %v\n%s\n%s", err, out, pods)
			}
			t.Logf("helm install --wait took %s", time.Since(start).Round(time.Second))
			return ctx
		}).
		Assess("the operator's pod runs on the real node and serves only the watched namespace", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			pods := &corev1.PodList{}
			g.Expect(c.List(ctx, pods, client.InNamespace(system), client.MatchingLabels{"app.kubernetes.io/component": "manager"})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(pods.Items[0].Spec.NodeName).To(Equal("real-node"))
			g.Expect(pods.Items[0].Spec.Containers[0].Image).To(Equal(operatorImage))
			servesOnly(t, c, watched, other)
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// The OLM bundle's install strategy, made as OLM makes it for an
// OperatorGroup with one target namespace (OLM itself does not run here):
// its Deployment with OLM's olm.targetNamespaces pod annotation, running
// the operator's image on the real node, its permissions as Roles in the
// operator's and the target namespace, its clusterPermissions as a
// ClusterRole. The kubelet passes the annotation through WATCH_NAMESPACES
// into --watch-namespaces: the operator serves the target namespace and
// leaves another alone.
func TestBundleInstallStrategyRunsTheOperator(t *testing.T) {
	var system, target, other string
	f := features.New("the OLM bundle's install strategy runs the operator").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("kind deploys the operator in the cluster for the whole suite")
			}
			g, c := NewWithT(t), kube(t, cfg)
			system, target, other = namespace(t, cfg, "olm-operator"), namespace(t, cfg, "olm-target"), namespace(t, cfg, "olm-other")
			csv, err := olm.ReadCSV()
			g.Expect(err).NotTo(HaveOccurred())
			install, err := olm.ForOperatorGroup(csv, system, target)
			g.Expect(err).NotTo(HaveOccurred())
			for _, obj := range install.RBAC {
				g.Expect(c.Create(ctx, obj)).To(Succeed())
			}
			t.Cleanup(func() {
				for _, obj := range install.ClusterScoped() {
					_ = c.Delete(context.Background(), obj)
				}
			})
			// What this machine needs beside what OLM makes: the image
			// built here (the CSV names the release's), on the real node.
			dep := install.Deployment
			spec := &dep.Spec
			spec.Template.Spec.Containers[0].Image = operatorImage
			spec.Template.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
			spec.Template.Spec.NodeSelector = map[string]string{realNodeLabel: "true"}
			spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: realNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			hostOperatorStandsAside(t, cfg, func() {
				_, _ = kubectl(context.Background(), cfg, "", "delete", "deployment", "-n", system, dep.Name, "--wait=true", "--timeout=2m")
			})
			g.Expect(c.Create(ctx, dep)).To(Succeed())
			if out, err := kubectl(ctx, cfg, "", "rollout", "status", "-n", system, "--timeout=3m", "deployment/"+dep.Name); err != nil {
				pods, _ := kubectl(ctx, cfg, "", "get", "pods", "-n", system, "-o", "wide")
				t.Fatalf("%v\n%s\n%s", err, out, pods)
			}
			return ctx
		}).
		Assess("the operator serves the target namespace only", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			servesOnly(t, kube(t, cfg), target, other)
			return ctx
		}).Feature()
	testenv.Test(t, f)
}
