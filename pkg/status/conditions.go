package status

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

// available is True when at least all but one of m's slots serve (one at
// a time is what a rollout or a node drain takes away), and at least one:
// counting, while the StatefulSet replaces a Deployment, the pods of the
// Deployment that still serve. True when size is 0. False while no
// membership is published for the clients (spec.keyMoves), whatever
// serves.
func available(m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	c := metav1.Condition{Type: cachev1alpha1.ConditionAvailable}
	want := desired.Replicas(m)
	ready := int32(0)
	if d := obs.StatefulSet; d != nil {
		ready = d.Status.AvailableReplicas
	}
	msg := fmt.Sprintf("%d of %d pods ready", ready, want)
	if r := obs.Replaced; r != nil && r.DeploymentStatus.AvailableReplicas > 0 {
		ready += r.DeploymentStatus.AvailableReplicas
		msg = fmt.Sprintf("%d of %d slots ready; %d pods of Deployment %s serve", ready-r.DeploymentStatus.AvailableReplicas, want, r.DeploymentStatus.AvailableReplicas, r.Name)
	}
	switch {
	case obs.StatefulSet == nil && obs.Replaced == nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, cachev1alpha1.ReasonStatefulSetPending, "No StatefulSet of this Memcached exists"
		switch {
		case obs.notOwned(owned.KindStatefulSet):
			c.Reason = cachev1alpha1.ReasonStatefulSetNotOwned
		case obs.Secret != nil:
			c.Reason, c.Message = obs.Secret.Reason, obs.Secret.Message
		}
	case want == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, cachev1alpha1.ReasonScaledToZero, "Size is 0: no pods are requested"
	case obs.Unpublished != "":
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, cachev1alpha1.ReasonMembershipUnpublished, obs.Unpublished
	case ready >= max(1, want-1):
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, cachev1alpha1.ReasonMinimumReplicasAvailable, msg
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, cachev1alpha1.ReasonMinimumReplicasUnavailable, msg
		if p := podProblemOf(m, obs); p != nil {
			c.Reason, c.Message = p.reason, msg+": "+p.message
		}
	}
	return c
}

// progressing is True while the StatefulSet rolls out or scales.
func progressing(m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	return rolloutCondition(cachev1alpha1.ConditionProgressing, m, obs)
}

// reconciling is the kstatus condition: True while the StatefulSet has not
// reached the desired state and is still making progress. It says what
// progressing says, under the name kstatus readers look for.
func reconciling(m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	return rolloutCondition(cachev1alpha1.ConditionReconciling, m, obs)
}

func rolloutCondition(conditionType string, m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	r := rolloutOf(m, obs)
	if (r.phase == rolloutPending || r.phase == rolloutInProgress) && wasReplacing(m) {
		// The StatefulSet is coming up beside the replaced Deployment.
		r.phase = rolloutReplacing
	}
	c := metav1.Condition{Type: conditionType, Message: r.message}
	switch r.phase {
	case rolloutPending, rolloutInProgress:
		c.Status, c.Reason = metav1.ConditionTrue, cachev1alpha1.ReasonRollingOut
		if r.reason != "" {
			c.Reason = r.reason // why it does not get on
		}
	case rolloutReplacing:
		c.Status, c.Reason = metav1.ConditionTrue, cachev1alpha1.ReasonReplacingDeployment
	case rolloutComplete:
		c.Status, c.Reason = metav1.ConditionFalse, cachev1alpha1.ReasonRolloutComplete
	case rolloutBlocked:
		c.Status, c.Reason = metav1.ConditionFalse, r.reason
	}
	return c
}

// wasReplacing tells whether m's last status said a Deployment was being
// replaced.
func wasReplacing(m *cachev1alpha1.Memcached) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionProgressing)
	return c != nil && c.Reason == cachev1alpha1.ReasonReplacingDeployment
}

// degraded is True when the cache cannot reach its desired state by itself.
func degraded(m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	return blockedCondition(cachev1alpha1.ConditionDegraded, "Nothing is wrong", m, obs)
}

// Stalled is the kstatus condition: True when progress stopped and needs a
// person. It says what degraded says, under the name kstatus readers look for.
func Stalled(m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	return blockedCondition(cachev1alpha1.ConditionStalled, "Progress is not blocked", m, obs)
}

func blockedCondition(conditionType, fineMessage string, m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	r := rolloutOf(m, obs)
	c := metav1.Condition{Type: conditionType}
	switch r.phase {
	case rolloutBlocked:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, r.reason, r.message
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected, fineMessage
	}
	return c
}

// PodProblem is why m's pods are not ready, as Kubernetes reports it: the
// reason and message the conditions give, and false when Kubernetes
// reports nothing wrong with them.
func PodProblem(m *cachev1alpha1.Memcached, obs Observation) (reason, message string, ok bool) {
	if p := podProblemOf(m, obs); p != nil {
		return p.reason, p.message, true
	}
	return "", "", false
}
