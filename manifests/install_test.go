//go:build integration

// Package manifests_test checks what a cluster admin installs: the kustomize
// bundle in manifests/default, applied to a real local cluster. It proves
// the manifests are accepted, that the manager pod meets the restricted Pod
// Security level, and that the generated ClusterRole is both sufficient for
// the operator and tight.
package manifests_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/localcluster"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/internal/testsupport/testcerts"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/jsonconv"
)

const (
	operatorNamespace = "memcached-operator-system"
	operatorSA        = "memcached-operator-controller-manager"
	timeout           = 90 * time.Second
	poll              = 200 * time.Millisecond
)

var (
	cluster *localcluster.Cluster
	k8s     client.Client
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx := context.Background()
	testenv.SetLogger()
	var err error
	if cluster, err = localcluster.Create(ctx, "install-test", localcluster.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = cluster.Delete(context.Background()) }()
	cfg, err := cluster.Config()
	if err == nil {
		k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The cluster has the Prometheus Operator's ServiceMonitor CRD, so
	// that the operator's RBAC is shown to cover monitoring too.
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{repo.Path("hack", "crds")}, ErrorIfPathMissing: true}); err != nil {
		fmt.Fprintln(os.Stderr, "installing the ServiceMonitor CRD:", err)
		return 1
	}
	return m.Run()
}

// kubectl runs the kubectl of bin/k8s on the test cluster.
func kubectl(t *testing.T, stdin []byte, args ...string) (string, error) {
	t.Helper()
	return repo.Kubectl(context.Background(), cluster.Kubeconfig, stdin, args...)
}

// bundle is the install bundle: what `make build-installer` writes to dist/install.yaml.
func bundle(t *testing.T) []byte {
	t.Helper()
	return kustomize(t, "default")
}

// kustomize builds the overlay manifests/<overlay>.
func kustomize(t *testing.T, overlay string) []byte {
	t.Helper()
	out, err := kubectl(t, nil, "kustomize", repo.Path("manifests", overlay))
	if err != nil {
		t.Fatalf("kustomize: %v\n%s", err, out)
	}
	return []byte(out)
}

// installTakeOver applies manifests/default with the takeover component
// (manifests/takeover), as docs/install.md tells a user taking over from
// the tutorial's operator to.
func installTakeOver(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, repo.Path("manifests", p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	overlay := fmt.Sprintf("resources:\n- %s\ncomponents:\n- %s\n", rel("default"), rel("takeover"))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := kubectl(t, nil, "kustomize", "--load-restrictor=LoadRestrictionsNone", dir)
	if err != nil {
		t.Fatalf("kustomize: %v\n%s", err, out)
	}
	// The component's role and binding get manifests/default's name
	// prefix when it is enabled there; from this overlay, they do not.
	out = strings.ReplaceAll(out, "  name: takeover\n", "  name: memcached-operator-takeover\n")
	if out, err := kubectl(t, []byte(out), "apply", "--server-side", "--field-manager=installer", "-f", "-"); err != nil {
		t.Fatalf("applying the bundle with the takeover component: %v\n%s", err, out)
	}
	// Its role goes with the test: the other tests see the operator's own.
	t.Cleanup(func() {
		if out, err := kubectl(t, nil, "delete", "clusterrolebinding,clusterrole", "memcached-operator-takeover", "--ignore-not-found"); err != nil {
			t.Errorf("deleting the takeover role: %v\n%s", err, out)
		}
	})
}

// install applies manifests/<overlay> for real.
func install(t *testing.T, overlay string) {
	t.Helper()
	out, err := kubectl(t, kustomize(t, overlay), "apply", "--server-side", "--field-manager=installer", "-f", "-")
	if err != nil {
		t.Fatalf("applying the bundle: %v\n%s", err, out)
	}
	if err := repo.WaitForCRDs(context.Background(), cluster.Kubeconfig, "crd/memcacheds.cache.example.com"); err != nil {
		t.Fatalf("waiting for the CRD: %v", err)
	}
}

func TestBundlePassesServerSideDryRun(t *testing.T) {
	g := NewWithT(t)
	b := bundle(t)
	// Namespaced objects need their namespace, and Memcached objects their
	// CRD, to exist: apply those two for real, then dry-run everything.
	var firsts [][]byte
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		if bytes.Contains(doc, []byte("kind: Namespace\n")) || bytes.Contains(doc, []byte("kind: CustomResourceDefinition\n")) {
			firsts = append(firsts, doc)
		}
	}
	g.Expect(firsts).To(HaveLen(2))
	out, err := kubectl(t, bytes.Join(firsts, []byte("\n---\n")), "apply", "--server-side", "--field-manager=installer", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)

	out, err = kubectl(t, b, "apply", "--server-side", "--dry-run=server", "--field-manager=installer", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("deployment.apps/memcached-operator-controller-manager serverside-applied (server dry run)"))
	g.Expect(out).NotTo(ContainSubstring("Warning"), "no deprecation or validation warnings")

	samples, err := kubectl(t, nil, "kustomize", repo.Path("manifests", "samples"))
	g.Expect(err).NotTo(HaveOccurred(), samples)
	out, err = kubectl(t, []byte(samples), "apply", "--server-side", "--dry-run=server", "-n", "default", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)
}

// podTemplates returns the pod templates of the Deployments in b.
func podTemplates(t *testing.T, b []byte) map[string]corev1.PodTemplateSpec {
	t.Helper()
	out := map[string]corev1.PodTemplateSpec{}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); err != nil {
			break
		}
		if d.Kind == "Deployment" {
			out[d.Name] = d.Spec.Template
		}
	}
	return out
}

func TestPodsMeetRestrictedPodSecurity(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "restricted-",
		Labels: map[string]string{
			"pod-security.kubernetes.io/enforce":         "restricted",
			"pod-security.kubernetes.io/enforce-version": "latest",
		},
	}}
	g.Expect(k8s.Create(ctx, ns)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })

	templates := podTemplates(t, bundle(t))
	manager, found := templates["memcached-operator-controller-manager"]
	g.Expect(found).To(BeTrue(), "the bundle has the manager Deployment")

	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: ns.Name, UID: "0"}}
	operand := podFromApplyConfiguration(t, desired.StatefulSet(m, testenv.Images, desired.SecretDigests{}))
	// With TLS and authentication: the reloader beside memcached, in a
	// shared process namespace.
	secure := m.DeepCopy()
	secure.Spec.TLS = &cachev1alpha1.TLSSpec{SecretName: "cache-tls", ClientCertificates: cachev1alpha1.ClientCertificatesRequire}
	secure.Spec.Auth = &cachev1alpha1.AuthSpec{SecretName: "cache-users"}
	images := testenv.Images
	images.Reloader = "memcached-operator:latest"
	secured := podFromApplyConfiguration(t, desired.StatefulSet(secure, images, desired.SecretDigests{TLS: "t", Auth: "a"}))
	g.Expect(secured.Spec.Containers).To(ContainElement(HaveField("Name", desired.ReloaderContainerName)))

	for name, tmpl := range map[string]corev1.PodTemplateSpec{"manager": manager, "memcached": operand, "memcached-with-reloader": secured} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Namespace: ns.Name, Labels: tmpl.Labels}, Spec: tmpl.Spec}
			pod.Spec.ServiceAccountName = "" // not in this namespace, and no concern of Pod Security
			// Pod Security admission enforces on pods; a violation is an error.
			err := k8s.Create(ctx, pod, client.DryRunAll)
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
}

func podFromApplyConfiguration(t *testing.T, ac any) corev1.PodTemplateSpec {
	t.Helper()
	var d appsv1.StatefulSet
	if err := jsonconv.Convert(ac, &d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template
}

// serviceAccountConfig is a client configuration that authenticates as the
// operator's ServiceAccount, with a token from the TokenRequest API.
func serviceAccountConfig(t *testing.T) *rest.Config {
	t.Helper()
	return serviceAccountConfigFor(t, operatorNamespace, operatorSA)
}

// grantedRules are the resource rules the user of cfg holds in ns beyond
// those of ns's default ServiceAccount (what every ServiceAccount holds),
// one per group, resource and verb: "group/resource:verb", the core group
// empty.
func grantedRules(t *testing.T, cfg *rest.Config, ns string) []string {
	t.Helper()
	rules := func(cfg *rest.Config) map[string]bool {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		review, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(context.Background(),
			&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("reviewing the rules in %s: %v", ns, err)
		}
		if review.Status.Incomplete {
			t.Fatalf("the rules review in %s is incomplete: %s", ns, review.Status.EvaluationError)
		}
		out := map[string]bool{}
		for _, r := range review.Status.ResourceRules {
			for _, group := range r.APIGroups {
				for _, resource := range r.Resources {
					for _, verb := range r.Verbs {
						rule := group + "/" + resource + ":" + verb
						if len(r.ResourceNames) > 0 {
							rule += fmt.Sprintf(" %v", r.ResourceNames)
						}
						out[rule] = true
					}
				}
			}
		}
		return out
	}
	// A new namespace gets its default ServiceAccount from the
	// controller-manager, a moment after it is made.
	NewWithT(t).Eventually(func() error {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "the default ServiceAccount of %s", ns)
	everyone := rules(serviceAccountConfigFor(t, ns, "default"))
	var granted []string
	for rule := range rules(cfg) {
		if !everyone[rule] {
			granted = append(granted, rule)
		}
	}
	return granted
}

// serviceAccountConfigFor is serviceAccountConfig for the ServiceAccount
// name in namespace.
func serviceAccountConfigFor(t *testing.T, namespace, name string) *rest.Config {
	t.Helper()
	admin, err := cluster.Config()
	if err != nil {
		t.Fatal(err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	if err := k8s.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatalf("requesting a token: %v", err)
	}
	return &rest.Config{
		Host:            admin.Host,
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData},
		QPS:             -1,
	}
}

// startOperator runs the operator as the user of cfg until the test ends.
func startOperator(t *testing.T, cfg *rest.Config, opts testenv.OperatorOptions) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done, err := testenv.StartOperator(ctx, cfg, opts)
	if err != nil {
		cancel()
		t.Fatalf("starting the operator: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("operator: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// available waits until the Memcached of key reports its generation,
// Available and size ready replicas.
func available(t *testing.T, key client.ObjectKey, size int32) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(context.Background(), key, got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue())
		g.Expect(got.Status.ReadyReplicas).To(Equal(size))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// lifecycle takes a Memcached through its life as the running operator
// serves it, in a new namespace it returns: create, scale, monitoring on
// and off, TLS from a Secret, drift corrected, events recorded, deleted.
func lifecycle(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)

	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: ns}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
	g.Expect(k8s.Create(ctx, m)).To(Succeed())
	dep := &appsv1.StatefulSet{}
	waitFor := func(size int32) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			got := &cachev1alpha1.Memcached{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue())
			g.Expect(got.Status.ReadyReplicas).To(Equal(size))
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), dep)).To(Succeed())
			g.Expect(*dep.Spec.Replicas).To(Equal(size))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	}

	// Create.
	waitFor(1)
	// Scale through the spec.
	g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":3}}`)))).To(Succeed())
	waitFor(3)
	// Monitoring on and off: the operator makes and deletes its
	// ServiceMonitor.
	g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"monitoring":{"enabled":true}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionMonitored)).To(BeTrue())
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), &monitoringv1.ServiceMonitor{})).To(Succeed())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"monitoring":null}}`)))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(m), &monitoringv1.ServiceMonitor{}))
	}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue())
	waitFor(3)
	// TLS from a Secret: the operator reads it (by name) and the pods
	// mount it.
	ca, pair, err := testcerts.ForService(ns, "cache")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8s.Create(ctx, ca.Secret(ns, "cache-tls", pair))).To(Succeed())
	g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"tls":{"secretName":"cache-tls"}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), dep)).To(Succeed())
		g.Expect(dep.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "cache-tls")))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	waitFor(3)
	// Drift: a person scales the StatefulSet; the operator restores it.
	g.Expect(k8s.SubResource("scale").Patch(ctx, dep.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`)), client.FieldOwner("kubectl"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), dep)).To(Succeed())
		g.Expect(*dep.Spec.Replicas).To(Equal(int32(3)))
		g.Expect(dep.ManagedFields).NotTo(ContainElement(HaveField("Manager", "kubectl")), "replicas taken back")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	// Events were recorded as the ServiceAccount.
	g.Eventually(func(g Gomega) {
		out, err := kubectl(t, nil, "get", "events.events.k8s.io", "-n", ns, "-o", "jsonpath={.items[*].reason}")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(ContainSubstring("DriftCorrected"))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	// Delete: garbage collection removes the StatefulSet. The garbage
	// collector learns of the new CRD at its next discovery resync (30 s).
	g.Expect(k8s.Delete(ctx, m)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(m), &appsv1.StatefulSet{}))
	}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue())
	return ns
}

// TestOperatorRunsUnderGeneratedRBAC runs the operator as its ServiceAccount,
// bound only to the roles of the bundle, through a whole lifecycle, and
// shows a request outside its role is refused.
func TestOperatorRunsUnderGeneratedRBAC(t *testing.T) {
	g := NewWithT(t)
	install(t, "default")
	cfg := serviceAccountConfig(t)

	startOperator(t, cfg, testenv.OperatorOptions{LeaderElectionNamespace: operatorNamespace})
	ns := lifecycle(t)
	ctx := context.Background()

	// What the bundle grants, exactly: the operator's rules in a Memcached's
	// namespace and in its own, beyond what every ServiceAccount holds. The
	// lifecycle above proves they suffice; this, that there is nothing more
	// (an added verb or resource fails here).
	managerRules := []string{
		"/configmaps:create", "/configmaps:delete", "/configmaps:get", "/configmaps:list", "/configmaps:patch", "/configmaps:watch",
		"/events:list",
		// Pods are listed and watched; where memcached runs warm, the
		// operator rolls them: it patches them (images, labels), deletes
		// them one at a time, and reads memcached's log once per restart.
		"/pods:list", "/pods:watch", "/pods:patch", "/pods:delete", "/pods/log:get", "/pods/resize:patch",
		"/secrets:list", "/secrets:watch",
		"/services:create", "/services:get", "/services:list", "/services:patch", "/services:watch",
		"apps/statefulsets:create", "apps/statefulsets:get", "apps/statefulsets:list", "apps/statefulsets:patch", "apps/statefulsets:watch",
		// The Deployments of the operator's versions before slots (and
		// of the tutorial's) are deleted once replaced.
		"apps/deployments:delete", "apps/deployments:get", "apps/deployments:list", "apps/deployments:watch",
		"authentication.k8s.io/tokenreviews:create",
		"authorization.k8s.io/subjectaccessreviews:create",
		"cache.example.com/memcacheds:get", "cache.example.com/memcacheds:list", "cache.example.com/memcacheds:watch",
		// spec.size alone, set for spec.autoscaling.
		"cache.example.com/memcacheds/scale:patch",
		"cache.example.com/memcacheds/status:get", "cache.example.com/memcacheds/status:patch",
		"events.k8s.io/events:create", "events.k8s.io/events:patch",
		"networking.k8s.io/networkpolicies:create", "networking.k8s.io/networkpolicies:delete", "networking.k8s.io/networkpolicies:get",
		"networking.k8s.io/networkpolicies:list", "networking.k8s.io/networkpolicies:patch", "networking.k8s.io/networkpolicies:watch",
		"monitoring.coreos.com/servicemonitors:create", "monitoring.coreos.com/servicemonitors:delete", "monitoring.coreos.com/servicemonitors:get",
		"monitoring.coreos.com/servicemonitors:list", "monitoring.coreos.com/servicemonitors:patch", "monitoring.coreos.com/servicemonitors:watch",
		"policy/poddisruptionbudgets:create", "policy/poddisruptionbudgets:delete", "policy/poddisruptionbudgets:get",
		"policy/poddisruptionbudgets:list", "policy/poddisruptionbudgets:patch", "policy/poddisruptionbudgets:watch",
	}
	leaderElectionRules := []string{
		"/events:create", "/events:patch",
		"coordination.k8s.io/leases:create", "coordination.k8s.io/leases:delete", "coordination.k8s.io/leases:get", "coordination.k8s.io/leases:list",
		"coordination.k8s.io/leases:patch", "coordination.k8s.io/leases:update", "coordination.k8s.io/leases:watch",
	}
	g.Expect(grantedRules(t, cfg, ns)).To(ConsistOf(managerRules), "in a Memcached's namespace")
	// Its own pod, read once at start for the reloader's image.
	ownImageRules := []string{"/pods:get"}
	g.Expect(grantedRules(t, cfg, operatorNamespace)).To(ConsistOf(append(append(managerRules, leaderElectionRules...), ownImageRules...)), "in the operator's namespace")

	// The role is tight: Secrets may be listed and watched, nothing more;
	// Pods neither read one by one nor deleted all at once; no Memcached
	// created or deleted.
	sa, err := client.New(cfg, client.Options{Scheme: testenv.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache-tls"}}
	for name, call := range map[string]func() error{
		"get a secret": func() error { return sa.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}) },
		"create secrets": func() error {
			return sa.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}})
		},
		"patch secrets":           func() error { return sa.Patch(ctx, secret, client.RawPatch(types.MergePatchType, []byte(`{}`))) },
		"delete secrets":          func() error { return sa.Delete(ctx, secret) },
		"get a pod":               func() error { return sa.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cache-0"}, &corev1.Pod{}) },
		"delete pods":             func() error { return sa.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns)) },
		"delete all statefulsets": func() error { return sa.DeleteAllOf(ctx, &appsv1.StatefulSet{}, client.InNamespace(ns)) },
		"delete a statefulset": func() error {
			return sa.Delete(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: ns}})
		},
		"create deployments": func() error {
			return sa.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}})
		},
		"create memcacheds": func() error {
			return sa.Create(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}})
		},
		"delete memcacheds": func() error {
			return sa.Delete(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: ns}})
		},
		"delete replicasets": func() error { return sa.DeleteAllOf(ctx, &appsv1.ReplicaSet{}, client.InNamespace(ns)) },
		"list replicasets":   func() error { return sa.List(ctx, &appsv1.ReplicaSetList{}, client.InNamespace(ns)) },
		// What only the takeover from the tutorial's operator needs
		// (manifests/takeover), not granted by the default install.
		"patch memcacheds": func() error {
			return sa.Patch(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: ns}}, client.RawPatch(types.MergePatchType, []byte(`{}`)))
		},
	} {
		err := call()
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: want Forbidden, got %v", name, err)
		g.Expect(strings.Contains(err.Error(), "system:serviceaccount:"+operatorNamespace+":"+operatorSA)).To(BeTrue())
	}
	writesOnlyItsOwn(t, sa, ns)
}

// writesOnlyItsOwn checks that the operator's ServiceAccount (sa), whose
// roles let it patch and delete pods, ConfigMaps and workloads in ns, is
// refused every such write to an object that is not a Memcached's (the
// bundle's ValidatingAdmissionPolicy), and may write its own.
func writesOnlyItsOwn(t *testing.T, sa client.Client, ns string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	g.Expect(k8s.Create(ctx, pod)).To(Succeed())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Namespace: ns}, Data: map[string]string{"k": "v"}}
	g.Expect(k8s.Create(ctx, cm)).To(Succeed())
	// Labelled as the operator's, but no Memcached's.
	labelled := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "labelled", Namespace: ns,
		Labels: map[string]string{desired.LabelManagedBy: desired.ManagedBy}}}
	g.Expect(k8s.Create(ctx, labelled)).To(Succeed())
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	g.Expect(k8s.Create(ctx, svc)).To(Succeed())
	image := client.RawPatch(types.StrategicMergePatchType, []byte(`{"spec":{"containers":[{"name":"c","image":"evil"}]}}`))
	note := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"x":"y"}}}`))
	for name, call := range map[string]func() error{
		"change another pod's image":  func() error { return sa.Patch(ctx, pod, image) },
		"delete another pod":          func() error { return sa.Delete(ctx, pod) },
		"change another ConfigMap":    func() error { return sa.Patch(ctx, cm, note) },
		"delete another ConfigMap":    func() error { return sa.Delete(ctx, cm) },
		"change a labelled ConfigMap": func() error { return sa.Patch(ctx, labelled, note) },
		"change another Service":      func() error { return sa.Patch(ctx, svc, note) },
		"create a ConfigMap of no Memcached": func() error {
			return sa.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: ns, Labels: labelled.Labels}})
		},
	} {
		err := call()
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: want Forbidden, got %v", name, err)
		g.Expect(err.Error()).To(ContainSubstring("writes only objects of its own"), name)
	}

	// Its own: a Memcached's StatefulSet and its pod.
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "own", Namespace: ns}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
	g.Expect(k8s.Create(ctx, m)).To(Succeed())
	own := &corev1.Pod{}
	g.Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "own-0"}, own)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	g.Expect(sa.Patch(ctx, own, note)).To(Succeed(), "the operator's own pod")
	g.Expect(sa.Patch(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "own", Namespace: ns}}, note)).To(Succeed(), "the operator's own StatefulSet")
}
