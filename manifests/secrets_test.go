//go:build integration

package manifests_test

import (
	"context"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testcerts"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

// The operator reads only the Secrets that Memcacheds name: it runs with
// the bundle's role minus its Secrets rule, plus a Role that lets it list
// and watch one Secret by name (resourceNames), and serves a Memcached
// with TLS from that Secret, while it cannot list the namespace's Secrets.
// Every request it makes for Secrets therefore names one.
func TestOperatorReadsOnlyTheSecretsMemcachedsName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	install(t, "default")
	role := &rbacv1.ClusterRole{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "memcached-operator-manager"}, role)).To(Succeed())
	t.Cleanup(func() {
		// The bundle's role back, as the installer's alone.
		if err := k8s.Delete(context.Background(), role); err != nil {
			t.Errorf("deleting the changed role: %v", err)
		}
		install(t, "default")
	})
	var rules []rbacv1.PolicyRule
	removed := 0
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "secrets") && r.APIGroups[0] == "" {
			g.Expect(r.Verbs).To(ConsistOf("list", "watch"), "the bundle grants Secrets list and watch, nothing more")
			removed++
			r.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(s string) bool { return s == "secrets" })
			if len(r.Resources) == 0 {
				continue
			}
		}
		rules = append(rules, r)
	}
	g.Expect(removed).To(Equal(1))
	role.Rules = rules
	g.Expect(k8s.Update(ctx, role)).To(Succeed())

	ns := testenv.Namespace(t, k8s)
	g.Expect(k8s.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache-tls-reader"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"cache-tls"}, Verbs: []string{"list", "watch"},
		}},
	})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache-tls-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cache-tls-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: operatorNamespace, Name: operatorSA}},
	})).To(Succeed())

	cfg := serviceAccountConfig(t)
	sa, err := client.New(cfg, client.Options{Scheme: testenv.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() bool {
		return apierrors.IsForbidden(sa.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)))
	}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "the operator cannot list the namespace's Secrets")
	g.Expect(sa.List(ctx, &corev1.SecretList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": "cache-tls"})).To(Succeed(), "but can list the one by name")

	ca, pair, err := testcerts.ForService(ns, "cache")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8s.Create(ctx, ca.Secret(ns, "cache-tls", pair))).To(Succeed())
	g.Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"}, StringData: map[string]string{"password": "x"}})).To(Succeed())

	startOperator(t, cfg, testenv.OperatorOptions{LeaderElectionNamespace: operatorNamespace})

	m := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: ns},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), TLS: &cachev1alpha1.TLSSpec{SecretName: "cache-tls"}},
	}
	g.Expect(k8s.Create(ctx, m)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue())
		dep := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), dep)).To(Succeed())
		g.Expect(dep.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "cache-tls")), "made once the Secret was read and found fit")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// A Secret outside its grant is reported, not fatal.
	other := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), TLS: &cachev1alpha1.TLSSpec{SecretName: "unrelated"}},
	}
	g.Expect(k8s.Create(ctx, other)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(other), got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionStalled)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonSecretUnreadable))
		g.Expect(c.Message).To(ContainSubstring("Secret unrelated cannot be read"))
		g.Expect(c.Message).To(ContainSubstring("forbidden"))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}
