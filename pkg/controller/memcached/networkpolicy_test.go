//go:build integration

package memcached_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/desired"
)

// networkPolicy.enabled gives the Memcached a NetworkPolicy of its own
// that follows the spec; another manager's label on it stays, a converged
// Memcached with one costs nothing, and turning it off deletes it.
func TestNetworkPolicyComesAndGoes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{
		Size:          ptr.To[int32](2),
		NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true},
	})
	converged(t, m)
	np := &networkingv1.NetworkPolicy{}
	g.Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(m), np) }).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	g.Expect(metav1.IsControlledBy(np, m)).To(BeTrue())
	g.Expect(np.Spec.PodSelector.MatchLabels).To(Equal(desired.SelectorLabels(m)))
	g.Expect(np.Spec.Ingress).To(HaveLen(1))
	g.Expect(np.Spec.Ingress[0].Ports).To(ConsistOf(HaveField("Port.IntVal", int32(11211)), HaveField("Port.StrVal", "memcached"), HaveField("Port.IntVal", desired.DiscoveryPort)))
	g.Expect(np.Spec.Ingress[0].From).To(Equal([]networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}), "by default, the pods of the namespace")

	// The clients change: the policy follows.
	web := cachev1alpha1.LabelSelector{MatchLabels: map[string]cachev1alpha1.LabelValue{"app": "web"}}
	patch := client.MergeFrom(m.DeepCopy())
	m.Spec.NetworkPolicy.Clients = []cachev1alpha1.NetworkPolicyPeer{{PodSelector: &web}}
	g.Expect(k8s.Patch(ctx, m, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), np)).To(Succeed())
		g.Expect(np.Spec.Ingress[0].From).To(Equal([]networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	expectAnotherManagersLabelAndFieldOnTheNetworkPolicy(t, m, np)

	// Deleted: the deletion's event brings it back.
	g.Expect(k8s.Delete(ctx, np)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &networkingv1.NetworkPolicy{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(got.UID).NotTo(Equal(np.UID), "a new NetworkPolicy")
		g.Expect(metav1.IsControlledBy(got, m)).To(BeTrue())
		np = got
	}).WithTimeout(atOnce).WithPolling(poll).Should(Succeed())

	// Turned off: the NetworkPolicy, read above, is deleted.
	mark := requests.Mark()
	g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"networkPolicy":{"enabled":false}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(m), &networkingv1.NetworkPolicy{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the NetworkPolicy is deleted, got %v", err)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	deletes := requests.Since(mark, testenv.PathContains("/namespaces/"+ns+"/networkpolicies/cache"), func(r testenv.Request) bool { return r.Method == http.MethodDelete })
	g.Expect(deletes).To(ContainElement(HaveField("Code", http.StatusOK)), "the operator deleted its NetworkPolicy")
	for _, d := range deletes {
		g.Expect(d.Body).To(ContainSubstring(string(np.UID)), "the delete's precondition names the NetworkPolicy that was read")
	}
	g.Eventually(func(g Gomega) {
		g.Expect(events(t, ns, "cache", "Deleted")).To(ContainElement(HaveField("Note", "Deleted NetworkPolicy cache")))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// expectAnotherManagersLabelAndFieldOnTheNetworkPolicy: another
// manager's label on np, m's NetworkPolicy, stays and costs nothing; a
// field the operator sets, taken by another manager, is taken back.
func expectAnotherManagersLabelAndFieldOnTheNetworkPolicy(t *testing.T, m *cachev1alpha1.Memcached, np *networkingv1.NetworkPolicy) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := m.Namespace
	// Another manager labels it: the label stays, and the operator sends
	// nothing for it, then or at a later reconcile.
	// The clients' change written to the status and told in an event first.
	converged(t, m)
	time.Sleep(time.Second)
	skipped := counterSum(t, "memcached_operator_applies_skipped_total", "kind", "NetworkPolicy")
	mark := requests.Mark()
	g.Expect(k8s.Apply(ctx, networkingv1ac.NetworkPolicy("cache", ns).WithLabels(map[string]string{"team": "payments"}),
		client.FieldOwner("policy-engine"))).To(Succeed())
	time.Sleep(time.Second)
	nudge(t, np)
	time.Sleep(window)
	g.Expect(requests.Since(mark, inNamespace(ns), testenv.NotWatch)).To(BeEmpty(), "a converged Memcached with a NetworkPolicy costs nothing")
	g.Expect(counterSum(t, "memcached_operator_applies_skipped_total", "kind", "NetworkPolicy")).To(BeNumerically(">=", skipped+2),
		"the label's and the nudge's reconciles found nothing to apply")
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), np)).To(Succeed())
	g.Expect(np.Labels).To(HaveKeyWithValue("team", "payments"))

	// Another manager takes a field the operator sets (who may connect):
	// the operator takes it back from the change's event, and says so.
	g.Expect(k8s.Apply(ctx, networkingv1ac.NetworkPolicy("cache", ns).WithSpec(networkingv1ac.NetworkPolicySpec().
		WithIngress(networkingv1ac.NetworkPolicyIngressRule().WithFrom(networkingv1ac.NetworkPolicyPeer().
			WithIPBlock(networkingv1ac.IPBlock().WithCIDR("0.0.0.0/0"))))),
		client.FieldOwner("intruder"), client.ForceOwnership)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), np)).To(Succeed())
		g.Expect(np.Spec.Ingress).To(HaveLen(1))
		g.Expect(np.Spec.Ingress[0].From).To(Equal([]networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}))
		g.Expect(events(t, ns, "cache", "DriftCorrected")).To(ContainElement(HaveField("Note", ContainSubstring("NetworkPolicy cache changed by [intruder]"))))
	}).WithTimeout(atOnce).WithPolling(poll).Should(Succeed())
}

// A NetworkPolicy of the Memcached's name that another made is left alone
// and reported; the cache still serves.
func TestForeignNetworkPolicyIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	foreign := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	g.Expect(k8s.Create(ctx, foreign)).To(Succeed())
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{
		Size: ptr.To[int32](1), NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true},
	})
	g.Eventually(func(g Gomega) {
		got := blockedBy(g, t, m, "NetworkPolicy")
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue(), "the cache serves")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	after := &networkingv1.NetworkPolicy{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(foreign), after)).To(Succeed())
	g.Expect(after.Spec.PodSelector.MatchLabels).To(Equal(map[string]string{"app": "other"}))
	g.Expect(after.OwnerReferences).To(BeEmpty())
	written := requests.Since(0, inNamespace(ns), testenv.PathContains("/networkpolicies/"), testenv.Wrote)
	g.Expect(written).To(BeEmpty(), "nothing is written to a NetworkPolicy the operator does not own")
}
