package status

import (
	"fmt"
	"strings"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

// phase is where the StatefulSet's rollout stands.
type phase int

// rollout is where the StatefulSet's rollout stands, and why.
type rollout struct {
	phase phase
	// reason is the conditions' reason when the rollout is blocked.
	reason  string
	message string
}

// rolloutOf ranks what stands in the way of m's rollout, first what
// blocks it: the StatefulSet not being m's, then a Secret, then a failed
// phase, then the other objects not being m's.
func rolloutOf(m *cachev1alpha1.Memcached, obs Observation) rollout {
	if r, ok := blockedRollout(m, obs); ok {
		return r
	}
	switch {
	case obs.Replacing != "":
		return rollout{phase: rolloutReplacing, message: obs.Replacing}
	case obs.StatefulSet == nil:
		return rollout{phase: rolloutPending, message: fmt.Sprintf("Waiting for StatefulSet %s to be created", m.Name)}
	case obs.Moving != "":
		// Every slot's pod is ready while keys move: a leaving slot's
		// serves until they have.
		return rollout{rolloutInProgress, cachev1alpha1.ReasonMovingKeys, obs.Moving}
	}
	r := statefulSetRollout(obs.StatefulSet, desired.Replicas(m))
	if r.phase == rolloutComplete {
		// A pod restarted in place is updated and ready from the moment
		// its images change until the kubelet stops memcached: the
		// rollout ends once the restart is confirmed.
		for _, p := range obs.Pods {
			if p.RestartingFrom != "" {
				return rollout{phase: rolloutInProgress, message: fmt.Sprintf("%s; memcached is restarting in place in pod %s", r.message, p.Name)}
			}
		}
		return r
	}
	// Why the rollout does not get on, as the kubelet, the scheduler or
	// the StatefulSet controller says, before the StatefulSet's own count.
	if p := podProblemOf(m, obs); p != nil {
		if p.stalled {
			return rollout{rolloutBlocked, p.reason, p.message}
		}
		return rollout{rolloutInProgress, p.reason, p.message}
	}
	return explainRollout(r, obs)
}

// blockedRollout is the rollout that only a change of the spec or of
// another's object can unblock, if any: a name taken, a takeover refused,
// a Secret unusable, an object the apiserver refuses.
func blockedRollout(m *cachev1alpha1.Memcached, obs Observation) (rollout, bool) {
	blockedBy := func(kind owned.Kind) rollout {
		name := m.Name
		if kind == owned.KindConfigMap {
			name = desired.MembershipName(m.Name)
		}
		return rollout{rolloutBlocked, NotOwnedReason(kind), notOwnedMessage(kind, name)}
	}
	switch {
	case obs.notOwned(owned.KindStatefulSet):
		return blockedBy(owned.KindStatefulSet), true
	case obs.TakeOverDisabled != "":
		return rollout{rolloutBlocked, cachev1alpha1.ReasonTakeOverDisabled, obs.TakeOverDisabled}, true
	case obs.Secret != nil:
		return rollout{rolloutBlocked, obs.Secret.Reason, obs.Secret.Message}, true
	case len(obs.Failed) > 0:
		return rollout{rolloutBlocked, cachev1alpha1.ReasonApplyFailed, failedMessage(obs.Failed)}, true
	case len(obs.NotOwned) > 0:
		// In the order the phases run: Service, budget, NetworkPolicy,
		// ServiceMonitor.
		return blockedBy(obs.NotOwned[0]), true
	}
	return rollout{}, false
}

// explainRollout adds to r, a rollout under way, why the pods restart
// (a failed reload) and how the rollout changes the pods that are left.
func explainRollout(r rollout, obs Observation) rollout {
	for _, p := range obs.Pods {
		if p.ReloadFailed != "" && obs.StatefulSet.RestartedFor != "" {
			r.reason = cachev1alpha1.ReasonReloadFailed
			r.message = fmt.Sprintf("Pod %s could not load the new Secret content in place (%s); the pods restart one at a time to mount it: %s",
				p.Name, p.ReloadFailed, r.message)
			return r
		}
	}
	if obs.RestartingForReload {
		// The pod that said so is gone: its slot restarts first.
		r.reason = cachev1alpha1.ReasonReloadFailed
		r.message = "A pod could not load the new Secret content in place; the pods restart one at a time to mount it: " + r.message
	}
	if obs.Rolling != "" {
		r.message += "; " + obs.Rolling
	}
	return r
}

// failedMessage names every failure, in the order of the phases that met
// them.
func failedMessage(failed []error) string {
	msgs := make([]string, len(failed))
	for i, err := range failed {
		msgs[i] = err.Error()
	}
	msg := strings.Join(msgs, "; ")
	return strings.ToUpper(msg[:1]) + msg[1:]
}

// statefulSetRollout is where d's rollout to want replicas stands, as the
// StatefulSet's status tells.
func statefulSetRollout(d *owned.Summary, want int32) rollout {
	inProgress := func(format string, args ...any) rollout {
		return rollout{phase: rolloutInProgress, message: fmt.Sprintf(format, args...)}
	}
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return inProgress("StatefulSet %s has changes its controller has not observed yet", d.Name)
	case d.Replicas != nil && *d.Replicas != want:
		return inProgress("StatefulSet %s has %d replicas desired, the Memcached asks for %d", d.Name, *d.Replicas, want)
	case st.Replicas > want:
		return inProgress("%d pods of removed slots pending termination", st.Replicas-want)
	case st.UpdatedReplicas < want:
		return inProgress("%d of %d pods updated", st.UpdatedReplicas, want)
	case st.AvailableReplicas < want:
		return inProgress("%d of %d pods available", st.AvailableReplicas, want)
	case st.UpdateRevision != "" && st.CurrentRevision != st.UpdateRevision && !d.OnDelete:
		return inProgress("StatefulSet %s is completing its rollout", d.Name)
	}
	return rollout{phase: rolloutComplete, message: fmt.Sprintf("%d of %d pods updated and available", st.AvailableReplicas, want)}
}

// NotOwnedReason is the reason, of the conditions and of the event, when
// an object of kind with the Memcached's name is not the Memcached's.
func NotOwnedReason(kind owned.Kind) string {
	d, _ := owned.Describe(kind)
	return d.NotOwnedReason()
}

// rollingOut tells whether the StatefulSet is on its way to what m asks
// for with nothing in the way: the rollout is neither complete, blocked,
// nor replacing a Deployment, and the StatefulSet exists.
func rollingOut(m *cachev1alpha1.Memcached, obs Observation) bool {
	return rolloutOf(m, obs).phase == rolloutInProgress
}

func notOwnedMessage(kind owned.Kind, name string) string {
	return fmt.Sprintf("%s %s exists and is not controlled by this Memcached; the operator leaves it alone. Delete or rename it, or rename the Memcached", kind, name)
}
