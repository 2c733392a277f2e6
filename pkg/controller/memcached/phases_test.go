//go:build integration

package memcached_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

// A Service the apiserver refuses (here a ResourceQuota of no Services)
// stops nothing else: the Deployment, the budget and the NetworkPolicy are
// applied all the same, and the status is written, naming the refusal.
// Once the quota goes, the Service follows.
func TestRefusedServiceStopsNoOtherObject(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-services"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")}},
	}
	g.Expect(k8s.Create(ctx, quota)).To(Succeed())
	// The quota admits nothing until its controller has counted usage.
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(quota), quota)).To(Succeed())
		g.Expect(quota.Status.Hard).To(HaveKey(corev1.ResourceServices))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{
		Size:          ptr.To[int32](2),
		NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true},
	})
	key := client.ObjectKeyFromObject(m)
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, key, &appsv1.StatefulSet{})).To(Succeed(), "the Deployment is applied")
		g.Expect(k8s.Get(ctx, key, &policyv1.PodDisruptionBudget{})).To(Succeed(), "the budget is applied")
		g.Expect(k8s.Get(ctx, key, &networkingv1.NetworkPolicy{})).To(Succeed(), "the NetworkPolicy is applied")
		err := k8s.Get(ctx, key, &corev1.Service{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the quota keeps the Service out, got %v", err)

		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation), "the status is written")
		for _, ct := range []string{cachev1alpha1.ConditionDegraded, cachev1alpha1.ConditionStalled} {
			c := meta.FindStatusCondition(got.Status.Conditions, ct)
			g.Expect(c).NotTo(BeNil(), ct)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), ct)
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonApplyFailed), ct)
			g.Expect(c.Message).To(And(ContainSubstring("Service cache"), ContainSubstring("exceeded quota")), "%s names the Service and the apiserver's refusal", ct)
		}
		g.Expect(got.Status.Service).To(BeNil(), "no address while no Service exists")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// The refusal is retried with the controller's backoff: nothing else
	// tells the operator that the quota went.
	g.Expect(k8s.Delete(ctx, quota)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, key, &corev1.Service{})).To(Succeed(), "the Service follows once the quota is gone")
		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.Service).NotTo(BeNil(), "the status tells where to connect")
		g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, cachev1alpha1.ConditionDegraded)).To(BeTrue(), "no longer Degraded")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	converged(t, m)
}
