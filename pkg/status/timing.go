package status

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/owned"
)

// When to write the status: what the status says is decided above, when
// it is worth writing here. Both read the same Observation.

// reportTimeout bounds how long, after the operator changed a StatefulSet,
// the Memcached's status waits for a report worth writing: the StatefulSet
// controller's first report on the change, and, while the status already
// lags the Memcached's generation, the rollout's end. Each report is a
// watch event that reconciles the Memcached again at once; this is the
// safety net, and what a slow rollout's status lags by at most.
const reportTimeout = 30 * time.Second

// Hold is how long m's status waits before it is written: while the
// StatefulSet controller has not reported on the operator's change yet
// (reportPending), or while its reports only tell of a rollout on its way
// (midRollout), for up to reportTimeout after the change. Every status of
// a rollout that ends within that time is then written once, at its end:
// one status write per change instead of one per report. Zero: write now.
func Hold(m *cachev1alpha1.Memcached, obs Observation, now time.Time) time.Duration {
	if obs.Replacing != "" || obs.Moving != "" || obs.RollingEmpties || len(obs.Failed) > 0 {
		// Worth reading at once: a Deployment being replaced, keys moving
		// between the slots (the clients' membership changes through it),
		// a rollout that empties caches (said before it does), a phase
		// that failed.
		return 0
	}
	if wait := reportPending(obs.StatefulSet, obs.StatefulSetChanged, now); wait > 0 {
		return wait
	}
	if midRollout(m, obs) {
		return sinceChange(obs.StatefulSet, obs.StatefulSetChanged, now)
	}
	return 0
}

// midRollout tells whether the status obs gives m would only say that the
// StatefulSet is rolling out as asked: nothing wrong, the cache still
// serving if it served, and m's status already lags its generation, so
// that kstatus, Argo CD's health check and kubectl wait read m as in
// progress whatever the conditions say (a Memcached nothing has written a
// status for has observedGeneration 0). A scale-up's moment below the
// minimum availability, with pods serving, is such a status.
// A rollout the Memcached's generation did not start (a Secret rotated) is
// written as it goes: its status would otherwise read as current. So is a
// rollout whose pods Kubernetes reports a problem with (unschedulable):
// that is worth reading at once.
func midRollout(m *cachev1alpha1.Memcached, obs Observation) bool {
	if m.Status.ObservedGeneration >= m.Generation || !rollingOut(m, obs) || podProblemOf(m, obs) != nil {
		return false
	}
	was := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionAvailable)
	served := was != nil && was.Status == metav1.ConditionTrue
	serves := obs.StatefulSet.Status.AvailableReplicas > 0 || available(m, obs).Status == metav1.ConditionTrue
	return !served || serves
}

// reportPending is how long the StatefulSet controller may still take to
// report on d: d has a generation it has not observed, and the operator
// changed it less than reportTimeout ago (sinceChange). Zero when the
// report is in, or overdue: a status is then written without it.
func reportPending(d *owned.Summary, justChanged bool, now time.Time) time.Duration {
	if d == nil || d.Status.ObservedGeneration >= d.Generation {
		return 0
	}
	return sinceChange(d, justChanged, now)
}

// sinceChange is what is left of reportTimeout since the operator changed
// d: in this reconcile (justChanged), or by the time the apiserver
// recorded on the operator's managed-fields entry (a later reconcile, such
// as the one the store seeing the applied StatefulSet starts). Zero when d
// was not changed by the operator's apply.
func sinceChange(d *owned.Summary, justChanged bool, now time.Time) time.Duration {
	if d == nil {
		return 0
	}
	if justChanged {
		// The apply's answer carries no managed fields to read the time from.
		return reportTimeout
	}
	if t := d.LastApplied(); t != nil {
		if left := t.Add(reportTimeout).Sub(now); left > 0 {
			// Capped: the apiserver's clock may run ahead of ours.
			return min(left, reportTimeout)
		}
	}
	return 0
}
