package desired

import (
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// WantsPodDisruptionBudget tells whether m should have a PodDisruptionBudget:
// only with more than one pod. With one, a budget of maxUnavailable 1 guards
// nothing, and one of 0 would block every node drain.
func WantsPodDisruptionBudget(m *cachev1alpha1.Memcached) bool {
	return Replicas(m) > 1
}

// PodDisruptionBudget lets voluntary disruptions (node drains) take at most
// one of m's pods at a time, so that at most one slice of the cache is cold.
func PodDisruptionBudget(m *cachev1alpha1.Memcached) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	return Budget(m, false)
}

// Budget is m's PodDisruptionBudget: while keys move (keysMoving: a move
// under way, a slot handing its keys off, or one handed off and not yet
// back), it lets no voluntary disruption take a pod, so that a drain
// evicts the next pod only once the last one's keys are back on its slot
// (an eviction refused is tried again: kubectl drain tries every 5 s).
func Budget(m *cachev1alpha1.Memcached, keysMoving bool) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	unavailable := int32(1)
	if keysMoving {
		unavailable = 0
	}
	return policyv1ac.PodDisruptionBudget(m.Name, m.Namespace).
		WithLabels(Labels(m)).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMaxUnavailable(intstr.FromInt32(unavailable)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m))))
}
