//go:build integration

package manifests_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/olm"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

// TestBundleRunsTheOperatorInATargetNamespace does with the bundle's CSV
// what OLM does for an OperatorGroup with one target namespace (OLM itself
// cannot run here): the install strategy's Deployment, with the
// olm.targetNamespaces annotation, in the operator's namespace; its
// permissions as Roles in the operator's and the target namespace; its
// clusterPermissions as a ClusterRole. The operator, run as that
// ServiceAccount and watching the target namespace, serves a Memcached
// there, and no request of its is refused.
func TestBundleRunsTheOperatorInATargetNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	operatorNS := testenv.Namespace(t, k8s)
	target := testenv.Namespace(t, k8s)
	install := installBundle(t, operatorNS, target)
	// The Deployment, as OLM makes it: the apiserver accepts the spec and
	// its field reference to the annotation.
	g.Expect(k8s.Create(ctx, install.Deployment)).To(Succeed())

	requests := &testenv.Requests{}
	startOperator(t, requests.Wrap(serviceAccountConfigFor(t, operatorNS, install.ServiceAccount)), testenv.OperatorOptions{
		LeaderElectionNamespace: operatorNS,
		WatchNamespaces:         []string{target},
	})
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: target}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}}
	g.Expect(k8s.Create(ctx, m)).To(Succeed())
	available(t, client.ObjectKeyFromObject(m), 2)
	g.Expect(requests.Since(0, func(r testenv.Request) bool { return r.Code == http.StatusForbidden })).To(BeEmpty(), "the CSV's permissions suffice")
}

// An OperatorGroup of all namespaces: OLM grants the CSV's namespaced
// permissions cluster-wide, so the rules of the operator's own namespace
// (its leader election Lease, core events, its own pod) are the bundle's
// Role and RoleBinding instead, which OLM creates in that namespace only.
// The operator, as that ServiceAccount with leader election, serves a
// Memcached in another namespace with no request refused, and holds there
// exactly the CSV's rules: none on Leases, a pod's get or writing core
// events (listing them is the operator's own, for why a StatefulSet cannot
// create its pods).
func TestBundleKeepsOwnNamespaceRulesNamespacedForAllNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	operatorNS := testenv.Namespace(t, k8s)
	elsewhere := testenv.Namespace(t, k8s)
	install := installBundle(t, operatorNS)

	cfg := serviceAccountConfigFor(t, operatorNS, install.ServiceAccount)
	for _, ns := range []string{elsewhere, "default"} {
		granted := grantedRules(t, cfg, ns)
		g.Expect(granted).NotTo(ContainElement(HavePrefix("coordination.k8s.io/leases:")), "in %s", ns)
		g.Expect(granted).NotTo(ContainElement(SatisfyAll(HavePrefix("/events:"), Not(Equal("/events:list")))), "in %s", ns)
		g.Expect(granted).NotTo(ContainElement("/pods:get"), "in %s", ns)
	}
	own := grantedRules(t, cfg, operatorNS)
	g.Expect(own).To(ContainElements("coordination.k8s.io/leases:create", "/events:create", "/pods:get"), "in the operator's namespace")

	requests := &testenv.Requests{}
	startOperator(t, requests.Wrap(cfg), testenv.OperatorOptions{LeaderElectionNamespace: operatorNS})
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: elsewhere}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
	g.Expect(k8s.Create(ctx, m)).To(Succeed())
	available(t, client.ObjectKeyFromObject(m), 1)
	// Requests into namespaces other tests are deleting are refused as
	// well (a namespace being terminated takes no new content): only this
	// test's namespaces and the cluster-wide requests count.
	g.Expect(requests.Since(0, func(r testenv.Request) bool {
		if r.Code != http.StatusForbidden {
			return false
		}
		_, rest, namespaced := strings.Cut(r.Path, "/namespaces/")
		return !namespaced || strings.HasPrefix(rest, elsewhere+"/") || strings.HasPrefix(rest, operatorNS+"/")
	})).To(BeEmpty(), "the bundle's permissions suffice")
}

// installBundle does what OLM does with the bundle for an OperatorGroup
// of the target namespaces (none: all) in operatorNS, but the Deployment:
// the CRD, the ServiceAccount and its roles, gone with the test.
func installBundle(t *testing.T, operatorNS string, targets ...string) *olm.Install {
	t.Helper()
	g := NewWithT(t)
	csv, err := olm.ReadCSV()
	g.Expect(err).NotTo(HaveOccurred())
	applyBundleCRD(t)
	install, err := olm.ForOperatorGroup(csv, operatorNS, targets...)
	g.Expect(err).NotTo(HaveOccurred())
	for _, obj := range install.RBAC {
		g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())
	}
	t.Cleanup(func() {
		for _, obj := range install.ClusterScoped() {
			_ = k8s.Delete(context.Background(), obj)
		}
	})
	return install
}

// applyBundleCRD applies the bundle's CRD, as OLM installs it.
func applyBundleCRD(t *testing.T) {
	t.Helper()
	crd := repo.Path("manifests", "bundle", "manifests", "memcacheds.cache.example.com.yaml")
	if out, err := kubectl(t, nil, "apply", "--server-side", "--field-manager=olm-test", "-f", crd); err != nil {
		t.Fatalf("applying the bundle's CRD: %v\n%s", err, out)
	}
	if err := repo.WaitForCRDs(context.Background(), cluster.Kubeconfig, "crd/memcacheds.cache.example.com"); err != nil {
		t.Fatalf("waiting for the CRD: %v", err)
	}
}
