//go:build integration

package manifests_test

import (
	"context"
	"net/http"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/repo"
	"github.com/example/memcached-operator/internal/testenv"
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
	raw, err := os.ReadFile(repo.Path("manifests", "bundle", "manifests", "memcached-operator.clusterserviceversion.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	g.Expect(yaml.Unmarshal(raw, csv)).To(Succeed())
	strategy := csv.Spec.InstallStrategy.StrategySpec
	// The bundle's CRD, as OLM installs it.
	crd := repo.Path("manifests", "bundle", "manifests", "memcacheds.cache.example.com.yaml")
	if out, err := kubectl(t, nil, "apply", "--server-side", "--field-manager=olm-test", "-f", crd); err != nil {
		t.Fatalf("applying the bundle's CRD: %v\n%s", err, out)
	}
	if out, err := kubectl(t, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd/memcacheds.cache.example.com"); err != nil {
		t.Fatalf("waiting for the CRD: %v\n%s", err, out)
	}

	operatorNS := testenv.Namespace(t, k8s)
	target := testenv.Namespace(t, k8s)
	account := strategy.DeploymentSpecs[0].Spec.Template.Spec.ServiceAccountName
	g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: account, Namespace: operatorNS}})).To(Succeed())
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: operatorNS}}
	for _, p := range strategy.Permissions {
		g.Expect(p.ServiceAccountName).To(Equal(account))
		for _, ns := range []string{operatorNS, target} {
			name := "csv-" + ns
			g.Expect(k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: p.Rules})).To(Succeed())
			g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects:   subjects,
			})).To(Succeed())
		}
	}
	for _, p := range strategy.ClusterPermissions {
		name := "csv-" + operatorNS
		g.Expect(k8s.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: p.Rules})).To(Succeed())
		g.Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   subjects,
		})).To(Succeed())
		t.Cleanup(func() {
			_ = k8s.Delete(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}})
			_ = k8s.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}})
		})
	}

	// The Deployment, as OLM makes it: the apiserver accepts the spec and
	// its field reference to the annotation.
	spec := strategy.DeploymentSpecs[0].Spec.DeepCopy()
	if spec.Template.Annotations == nil {
		spec.Template.Annotations = map[string]string{}
	}
	spec.Template.Annotations["olm.targetNamespaces"] = target
	g.Expect(k8s.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: strategy.DeploymentSpecs[0].Name, Namespace: operatorNS},
		Spec:       *spec,
	})).To(Succeed())

	requests := &testenv.Requests{}
	startOperator(t, requests.Wrap(serviceAccountConfigFor(t, operatorNS, account)), testenv.OperatorOptions{
		LeaderElectionNamespace: operatorNS,
		WatchNamespaces:         []string{target},
	})
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: target}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}}
	g.Expect(k8s.Create(ctx, m)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue())
		g.Expect(got.Status.ReadyReplicas).To(Equal(int32(2)))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	g.Expect(requests.Since(0, func(r testenv.Request) bool { return r.Code == http.StatusForbidden })).To(BeEmpty(), "the CSV's permissions suffice")
}
