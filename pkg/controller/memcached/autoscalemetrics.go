package memcached

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/autoscale"
)

// The readings spec.autoscaling decides on, each poll: the status tells
// only the decisions.
var (
	autoscalingSignal = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "memcached_operator_autoscaling_signal",
		Help: "What a Memcached's slots said at the autoscaler's last reading of all of them: read_evictions_per_minute (per slot), hit_ratio, gets_per_second, working_set_bytes (summed; -1 unknown) and slot_bytes (memcached's item memory, the smallest slot's).",
	}, []string{"namespace", "name", "signal"})
	autoscalingNext = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "memcached_operator_autoscaling_next",
		Help: "1 for the step the autoscaler would take on its last reading (status.autoscaling.next).",
	}, []string{"namespace", "name", "next"})
	autoscalingSteps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memcached_operator_autoscaling_steps_total",
		Help: "Changes of spec.size the autoscaler made, by direction (ScaleUp, ScaleDown).",
	}, []string{"namespace", "name", "direction"})
)

func init() {
	metrics.Registry.MustRegister(autoscalingSignal, autoscalingNext, autoscalingSteps)
}

// recordAutoscaling sets m's autoscaling metrics from its last sample and
// decision.
func recordAutoscaling(m *cachev1alpha1.Memcached, samples []autoscale.Sample, d autoscale.Decision) {
	for _, next := range []string{autoscale.Hold, autoscale.ScaleUp, autoscale.ScaleDown, autoscale.Blocked} {
		v := 0.0
		if next == d.Next {
			v = 1
		}
		autoscalingNext.WithLabelValues(m.Namespace, m.Name, next).Set(v)
	}
	if len(samples) == 0 {
		return
	}
	s := samples[len(samples)-1]
	for signal, v := range map[string]float64{
		"read_evictions_per_minute": s.ReadEvictionsPerMinute,
		"hit_ratio":                 s.HitRatio,
		"gets_per_second":           s.GetsPerSecond,
		"working_set_bytes":         float64(s.WorkingSetBytes),
		"slot_bytes":                float64(s.SlotBytes),
	} {
		autoscalingSignal.With(prometheus.Labels{"namespace": m.Namespace, "name": m.Name, "signal": signal}).Set(v)
	}
}

// forgetAutoscaling removes key's autoscaling series.
func forgetAutoscaling(key types.NamespacedName) {
	who := prometheus.Labels{"namespace": key.Namespace, "name": key.Name}
	autoscalingSignal.DeletePartialMatch(who)
	autoscalingNext.DeletePartialMatch(who)
	autoscalingSteps.DeletePartialMatch(who)
}
