//go:build integration

package memcached_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

// Each Memcached's slots, ready pods and conditions are metrics of the
// operator, set from the status it computes (what the alerting rules of
// manifests/prometheus read): a condition's series follows its reason,
// and a Memcached's series go with it.
func TestAMemcachedsStatusIsInTheMetrics(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)})
	converged(t, m)
	key := types.NamespacedName{Namespace: ns, Name: "cache"}
	available := map[string]string{"type": cachev1alpha1.ConditionAvailable}
	g.Eventually(func(g Gomega) {
		g.Expect(series(t, "memcached_operator_memcached_slots", key, nil)).To(ConsistOf(2.0))
		g.Expect(series(t, "memcached_operator_memcached_ready_pods", key, nil)).To(ConsistOf(2.0))
		g.Expect(seriesLabels(t, "memcached_operator_memcached_condition", key, available)).To(ConsistOf(map[string]string{
			"namespace": ns, "name": "cache", "type": cachev1alpha1.ConditionAvailable,
			"status": "True", "reason": cachev1alpha1.ReasonMinimumReplicasAvailable,
		}))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":0}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(series(t, "memcached_operator_memcached_slots", key, nil)).To(ConsistOf(0.0))
		g.Expect(seriesLabels(t, "memcached_operator_memcached_condition", key, available)).To(ConsistOf(
			HaveKeyWithValue("reason", cachev1alpha1.ReasonScaledToZero)), "one series per condition: the old reason's is gone")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	g.Expect(k8s.Delete(ctx, m)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(series(t, "memcached_operator_memcached_slots", key, nil)).To(BeEmpty())
		g.Expect(series(t, "memcached_operator_memcached_condition", key, nil)).To(BeEmpty())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// series are the values of the gauge name of the in-process operator's
// registry for the Memcached key, of the series that also have labels.
func series(t *testing.T, name string, key types.NamespacedName, labels map[string]string) []float64 {
	t.Helper()
	var out []float64
	eachSeries(t, name, key, labels, func(_ map[string]string, v float64) { out = append(out, v) })
	return out
}

// seriesLabels are the label sets of those series.
func seriesLabels(t *testing.T, name string, key types.NamespacedName, labels map[string]string) []map[string]string {
	t.Helper()
	var out []map[string]string
	eachSeries(t, name, key, labels, func(l map[string]string, _ float64) { out = append(out, l) })
	return out
}

func eachSeries(t *testing.T, name string, key types.NamespacedName, labels map[string]string, f func(map[string]string, float64)) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	next:
		for _, s := range fam.GetMetric() {
			got := map[string]string{}
			for _, l := range s.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["namespace"] != key.Namespace || got["name"] != key.Name {
				continue
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			f(got, s.GetGauge().GetValue())
		}
	}
}
