package memcached

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	cacheac "github.com/example/memcached-operator/applyconfig/api/v1alpha1"
)

// The metrics of each Memcached, set from the status every reconcile
// computes, whether or not it writes it: what the alerting rules of
// manifests/prometheus read. They cost no request.
var (
	memcachedCondition = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "memcached_operator_memcached_condition",
		Help: "1 for each condition of a Memcached's status as the operator last computed it, with its status and reason.",
	}, []string{"namespace", "name", "type", "status", "reason"})
	memcachedSlots = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "memcached_operator_memcached_slots",
		Help: "The slots a Memcached's spec asks for (spec.size).",
	}, []string{"namespace", "name"})
	memcachedReadyPods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "memcached_operator_memcached_ready_pods",
		Help: "A Memcached's ready pods (status.readyReplicas).",
	}, []string{"namespace", "name"})
	certificateExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "memcached_operator_memcached_certificate_expiry_timestamp_seconds",
		Help: "When the certificate a Memcached's memcached serves expires (status.tls.notAfter), in seconds since the epoch.",
	}, []string{"namespace", "name"})
	certificateExpiresSoon = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "memcached_operator_memcached_certificate_expires_soon",
		Help: "1 when the certificate a Memcached's memcached serves should have been renewed by now (status.tls.expiresSoon), else 0.",
	}, []string{"namespace", "name"})
	slotKeysLost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memcached_operator_slot_keys_lost_total",
		Help: "Slots of a Memcached with key moves whose pod went without handing its keys off (the KeysLost event).",
	}, []string{"namespace", "name"})
	keyMoveStepsIncomplete = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memcached_operator_key_move_steps_incomplete_total",
		Help: "Steps of a key move or hand-off (copy, settle) that ended with a pod silent past the step's bound or failed, by Memcached and step.",
	}, []string{"namespace", "name", "step"})
)

func init() {
	metrics.Registry.MustRegister(memcachedCondition, memcachedSlots, memcachedReadyPods, certificateExpiry, certificateExpiresSoon, slotKeysLost, keyMoveStepsIncomplete)
}

// recordStatusMetrics sets the metrics of m from st, the status computed
// for it.
func recordStatusMetrics(m *cachev1alpha1.Memcached, st *cacheac.MemcachedStatusApplyConfiguration) {
	who := prometheus.Labels{"namespace": m.Namespace, "name": m.Name}
	for _, c := range st.Conditions {
		typ := ptr.Deref(c.Type, "")
		now := [2]string{string(ptr.Deref(c.Status, "")), ptr.Deref(c.Reason, "")}
		// The new series first, then the old one's removal: a scrape
		// never finds the condition without a series (an alert's for
		// would start again).
		memcachedCondition.WithLabelValues(m.Namespace, m.Name, typ, now[0], now[1]).Set(1)
		if was, ok := conditionSeries.Swap(conditionKey{m.Namespace, m.Name, typ}, now); ok && was.([2]string) != now {
			old := was.([2]string)
			memcachedCondition.DeleteLabelValues(m.Namespace, m.Name, typ, old[0], old[1])
		}
	}
	memcachedSlots.With(who).Set(float64(ptr.Deref(m.Spec.Size, 1)))
	memcachedReadyPods.With(who).Set(float64(ptr.Deref(st.ReadyReplicas, 0)))
	if st.TLS != nil && st.TLS.NotAfter != nil {
		certificateExpiry.With(who).Set(float64(st.TLS.NotAfter.Unix()))
		soon := 0.0
		if ptr.Deref(st.TLS.ExpiresSoon, false) {
			soon = 1
		}
		certificateExpiresSoon.With(who).Set(soon)
	} else {
		certificateExpiry.Delete(who)
		certificateExpiresSoon.Delete(who)
	}
}

// conditionSeries holds, by Memcached and condition type (conditionKey),
// the status and reason of its series in memcachedCondition.
var conditionSeries sync.Map

type conditionKey struct{ namespace, name, typ string }

// forgetMetrics removes the series of a Memcached that is gone.
func forgetMetrics(key types.NamespacedName) {
	conditionSeries.Range(func(k, _ any) bool {
		if c := k.(conditionKey); c.namespace == key.Namespace && c.name == key.Name {
			conditionSeries.Delete(k)
		}
		return true
	})
	who := prometheus.Labels{"namespace": key.Namespace, "name": key.Name}
	memcachedCondition.DeletePartialMatch(who)
	memcachedSlots.Delete(who)
	memcachedReadyPods.Delete(who)
	certificateExpiry.Delete(who)
	certificateExpiresSoon.Delete(who)
	slotKeysLost.Delete(who)
	keyMoveStepsIncomplete.DeletePartialMatch(who)
	forgetAutoscaling(key)
}
