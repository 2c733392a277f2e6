package memcached

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/pkg/owned"
)

func TestReportPendingWaitsOnlyForAFreshChangeNotYetObserved(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	entry := func(manager string, op metav1.ManagedFieldsOperationType, ago time.Duration) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Time: &metav1.Time{Time: now.Add(-ago)}}
	}
	deployment := func(generation, observed int64, entries ...metav1.ManagedFieldsEntry) *owned.Summary {
		s, err := owned.Observed(&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: generation, ManagedFields: entries},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: observed},
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tests := []struct {
		name string
		d    *owned.Summary
		just bool
		want time.Duration
	}{
		{"no Deployment", nil, false, 0},
		{"changed in this reconcile, not observed", deployment(2, 1), true, deploymentReportTimeout},
		{"changed in this reconcile without a new generation", deployment(2, 2), true, 0},
		{"report in", deployment(2, 2, entry(owned.FieldManager, metav1.ManagedFieldsOperationApply, time.Second)), false, 0},
		{"changed 10 s ago, not observed", deployment(2, 1, entry(owned.FieldManager, metav1.ManagedFieldsOperationApply, 10*time.Second)), false, 20 * time.Second},
		{"changed long ago, not observed: overdue", deployment(2, 1, entry(owned.FieldManager, metav1.ManagedFieldsOperationApply, time.Minute)), false, 0},
		{"changed by another manager", deployment(2, 1, entry("kubectl", metav1.ManagedFieldsOperationApply, time.Second)), false, 0},
		{"the operator's entry from an update, not an apply", deployment(2, 1, entry(owned.FieldManager, metav1.ManagedFieldsOperationUpdate, time.Second)), false, 0},
		{"the apiserver's clock ahead", deployment(2, 1, entry(owned.FieldManager, metav1.ManagedFieldsOperationApply, -time.Hour)), false, deploymentReportTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(reportPending(tt.d, tt.just, now)).To(Equal(tt.want))
		})
	}
}
