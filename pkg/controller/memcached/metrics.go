package memcached

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// kindMemcachedStatus labels metrics about Memcached statuses; the owned
// objects are labelled with their kind.
const kindMemcachedStatus = "Memcached/status"

var (
	appliesSent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memcached_operator_applies_sent_total",
		Help: "Server-side applies sent, by kind of object.",
	}, []string{"kind"})
	appliesSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memcached_operator_applies_skipped_total",
		Help: "Applies not sent because the fields the operator owns already held the desired values, by kind of object.",
	}, []string{"kind"})
	driftCorrected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memcached_operator_drift_corrections_total",
		Help: "Fields owned by the operator that another field manager changed and the operator restored, by kind of object.",
	}, []string{"kind"})
	fieldsNotKept = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memcached_operator_applies_not_kept_total",
		Help: "Applies after which the apiserver did not keep fields the operator set (its Kubernetes version does not serve them, or their feature gate is off), by kind of object.",
	}, []string{"kind"})
	foreignObjectsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memcached_operator_foreign_objects_refused_total",
		Help: "Reconciles that found an object of the Memcached's name not controlled by it and left it alone, by kind of object.",
	}, []string{"kind"})
)

func init() {
	metrics.Registry.MustRegister(appliesSent, appliesSkipped, driftCorrected, fieldsNotKept, foreignObjectsRefused)
}
