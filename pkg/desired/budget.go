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
	return policyv1ac.PodDisruptionBudget(m.Name, m.Namespace).
		WithLabels(Labels(m)).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMaxUnavailable(intstr.FromInt32(1)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m))))
}
