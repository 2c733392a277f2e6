//go:build integration

package memcached_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1ac "github.com/prometheus-operator/prometheus-operator/pkg/client/applyconfiguration/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/desired"
)

// Monitoring on gives the pods an exporter, the Service its port and the
// cluster a ServiceMonitor of the Memcached's; a converged monitored
// Memcached costs nothing, another manager's label on its ServiceMonitor
// stays, and monitoring off removes all three.
func TestMonitoringComesAndGoes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{
		Size: ptr.To[int32](2),
		Monitoring: &cachev1alpha1.MonitoringSpec{
			Enabled:              true,
			Interval:             "30s",
			ServiceMonitorLabels: map[string]cachev1alpha1.LabelValue{"release": "prometheus"},
		},
	})
	got, dep := converged(t, m)
	g.Expect(got.Status.Image).To(Equal(defaultImage), "the image in use, spec.image being unset")
	containers := dep.Spec.Template.Spec.Containers
	i := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == desired.ExporterContainerName })
	g.Expect(i).NotTo(Equal(-1), "an exporter among %v", containers)
	exporter := containers[i]
	g.Expect(exporter.Image).To(Equal(desired.DefaultExporterImage))
	g.Expect(exporter.Args).To(ContainElement("--memcached.address=localhost:11211"))
	g.Expect(exporter.Ports).To(ConsistOf(HaveField("ContainerPort", desired.MetricsPort)))

	sm := &monitoringv1.ServiceMonitor{}
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionMonitored)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonServiceMonitorReady))

		svc := &corev1.Service{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), svc)).To(Succeed())
		g.Expect(svc.Spec.Ports).To(ContainElement(And(HaveField("Name", desired.MetricsPortName), HaveField("Port", desired.MetricsPort))))

		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), sm)).To(Succeed())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	g.Expect(metav1.IsControlledBy(sm, m)).To(BeTrue())
	g.Expect(sm.Labels).To(HaveKeyWithValue("release", "prometheus"))
	g.Expect(sm.Spec.Selector.MatchLabels).To(Equal(desired.SelectorLabels(m)))
	g.Expect(sm.Spec.Endpoints).To(HaveLen(1))
	g.Expect(sm.Spec.Endpoints[0].Port).To(Equal(desired.MetricsPortName))
	g.Expect(sm.Spec.Endpoints[0].Interval).To(Equal(monitoringv1.Duration("30s")))

	expectAnotherManagersLabelOnTheServiceMonitorCostsNothing(t, m, sm)

	expectMonitoringOffRemovesItsObjects(t, m)

}

// expectMonitoringOffRemovesItsObjects: with monitoring off, the
// exporter, the port, the ServiceMonitor and the condition go.
func expectMonitoringOffRemovesItsObjects(t *testing.T, m *cachev1alpha1.Memcached) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := m.Namespace
	sm := &monitoringv1.ServiceMonitor{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), sm)).To(Succeed())
	mark := requests.Mark()
	g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"monitoring":null}}`)))).To(Succeed())
	got, dep := converged(t, m)
	g.Expect(dep.Spec.Template.Spec.Containers).NotTo(ContainElement(HaveField("Name", desired.ExporterContainerName)))
	g.Expect(meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionMonitored)).To(BeNil())
	g.Eventually(func(g Gomega) {
		svc := &corev1.Service{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), svc)).To(Succeed())
		g.Expect(svc.Spec.Ports).NotTo(ContainElement(HaveField("Name", desired.MetricsPortName)))
		err := k8s.Get(ctx, client.ObjectKeyFromObject(m), &monitoringv1.ServiceMonitor{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ServiceMonitor is deleted, got %v", err)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	deletes := requests.Since(mark, testenv.PathContains("/namespaces/"+ns+"/servicemonitors/cache"), func(r testenv.Request) bool { return r.Method == http.MethodDelete })
	// A reconcile between the delete and the store seeing it may delete
	// again, and find nothing (404).
	g.Expect(deletes).To(ContainElement(HaveField("Code", http.StatusOK)), "the operator deleted its ServiceMonitor")
	for _, d := range deletes {
		g.Expect(d.Code).To(BeElementOf(http.StatusOK, http.StatusNotFound))
		g.Expect(d.Body).To(ContainSubstring(string(sm.UID)), "the delete's precondition names the ServiceMonitor that was read")
	}
}

// expectAnotherManagersLabelOnTheServiceMonitorCostsNothing: another
// manager's label on sm, m's ServiceMonitor, stays, and the operator sends
// nothing for it, then or at any later reconcile.
func expectAnotherManagersLabelOnTheServiceMonitorCostsNothing(t *testing.T, m *cachev1alpha1.Memcached, sm *monitoringv1.ServiceMonitor) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := m.Namespace
	converged(t, m)
	time.Sleep(time.Second) // the last event of the change above recorded
	skipped := counterSum(t, "memcached_operator_applies_skipped_total", "kind", "ServiceMonitor")
	mark := requests.Mark()
	g.Expect(k8s.Apply(ctx, monitoringv1ac.ServiceMonitor("cache", ns).WithLabels(map[string]string{"team": "payments"}),
		client.FieldOwner("policy-engine"))).To(Succeed())
	time.Sleep(time.Second)
	nudge(t, sm)
	time.Sleep(window)
	g.Expect(requests.Since(mark, inNamespace(ns), testenv.NotWatch)).To(BeEmpty(), "a converged monitored Memcached costs nothing")
	g.Expect(counterSum(t, "memcached_operator_applies_skipped_total", "kind", "ServiceMonitor")).To(BeNumerically(">=", skipped+2),
		"the label's and the nudge's reconciles found nothing to apply")
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), sm)).To(Succeed())
	g.Expect(sm.Labels).To(HaveKeyWithValue("team", "payments"))
}

// A ServiceMonitor of the Memcached's name that another made is left alone
// and reported.
func TestForeignServiceMonitorIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	foreign := &monitoringv1.ServiceMonitor{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache", Labels: map[string]string{"app": "other"}},
		Spec: monitoringv1.ServiceMonitorSpec{
			Selector:  metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Endpoints: []monitoringv1.Endpoint{{Port: "web"}},
		},
	}
	g.Expect(k8s.Create(ctx, foreign)).To(Succeed())
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{
		Size: ptr.To[int32](1), Monitoring: &cachev1alpha1.MonitoringSpec{Enabled: true},
	})
	g.Eventually(func(g Gomega) {
		got := blockedBy(g, t, m, "ServiceMonitor")
		c := meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionMonitored)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonServiceMonitorNotOwned))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue(), "the cache serves")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	after := &monitoringv1.ServiceMonitor{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(foreign), after)).To(Succeed())
	g.Expect(after.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app": "other"}))
	g.Expect(after.OwnerReferences).To(BeEmpty())
}
