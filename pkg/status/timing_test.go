package status

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/owned"
)

func TestReportPendingWaitsOnlyForAFreshChangeNotYetObserved(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	entry := func(manager string, op metav1.ManagedFieldsOperationType, ago time.Duration) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Time: &metav1.Time{Time: now.Add(-ago)}}
	}
	deployment := func(generation, observed int64, entries ...metav1.ManagedFieldsEntry) *owned.Summary {
		s, err := owned.SummarizeAnswer(&appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Generation: generation, ManagedFields: entries},
			Status:     appsv1.StatefulSetStatus{ObservedGeneration: observed},
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
		{"no StatefulSet", nil, false, 0},
		{"changed in this reconcile, not observed", deployment(2, 1), true, reportTimeout},
		{"changed in this reconcile without a new generation", deployment(2, 2), true, 0},
		{"report in", deployment(2, 2, entry(owned.FieldManager, metav1.ManagedFieldsOperationApply, time.Second)), false, 0},
		{"changed 10 s ago, not observed", deployment(2, 1, entry(owned.FieldManager, metav1.ManagedFieldsOperationApply, 10*time.Second)), false, 20 * time.Second},
		{"changed long ago, not observed: overdue", deployment(2, 1, entry(owned.FieldManager, metav1.ManagedFieldsOperationApply, time.Minute)), false, 0},
		{"changed by another manager", deployment(2, 1, entry("kubectl", metav1.ManagedFieldsOperationApply, time.Second)), false, 0},
		{"the operator's entry from an update, not an apply", deployment(2, 1, entry(owned.FieldManager, metav1.ManagedFieldsOperationUpdate, time.Second)), false, 0},
		{"the apiserver's clock ahead", deployment(2, 1, entry(owned.FieldManager, metav1.ManagedFieldsOperationApply, -time.Hour)), false, reportTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(reportPending(tt.d, tt.just, now)).To(Equal(tt.want))
		})
	}
}

func TestStatusWaitsForTheRolloutsEndOnlyWhileTheStatusLags(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	applied := func(ago time.Duration) []metav1.ManagedFieldsEntry {
		return []metav1.ManagedFieldsEntry{{Manager: owned.FieldManager, Operation: metav1.ManagedFieldsOperationApply, Time: &metav1.Time{Time: now.Add(-ago)}}}
	}
	// deployment is a StatefulSet with replicas desired, of which ready
	// are ready and available; changed by the operator ago.
	deployment := func(replicas, ready int32, ago time.Duration) *owned.Summary {
		s, err := owned.SummarizeAnswer(&appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "cache", Generation: 2, ManagedFields: applied(ago)},
			Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To(replicas)},
			Status: appsv1.StatefulSetStatus{
				ObservedGeneration: 2, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: ready, AvailableReplicas: ready,
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// memcached has size replicas; its status was written for generation
	// observed, with available as available ("" for none).
	memcached := func(size int32, observed int64, available metav1.ConditionStatus) *cachev1alpha1.Memcached {
		m := &cachev1alpha1.Memcached{
			ObjectMeta: metav1.ObjectMeta{Name: "cache", Generation: 2},
			Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To(size)},
			Status:     cachev1alpha1.MemcachedStatus{ObservedGeneration: observed},
		}
		if available != "" {
			m.Status.Conditions = []metav1.Condition{{Type: cachev1alpha1.ConditionAvailable, Status: available}}
		}
		return m
	}
	// unobserved is a StatefulSet whose controller has not seen its latest
	// generation.
	unobserved := deployment(1, 1, time.Hour)
	unobserved.Generation = 3
	tests := []struct {
		name string
		m    *cachev1alpha1.Memcached
		obs  Observation
		want time.Duration
	}{
		{"created 5 s ago, no pod ready yet", memcached(1, 0, ""), Observation{StatefulSet: deployment(1, 0, 5*time.Second)}, 25 * time.Second},
		{"created in this reconcile", memcached(1, 0, ""), Observation{StatefulSet: deployment(1, 0, time.Hour), StatefulSetChanged: true}, reportTimeout},
		{"created and rolled out", memcached(1, 0, ""), Observation{StatefulSet: deployment(1, 1, 5*time.Second)}, 0},
		{"scaled 10 s ago, serving meanwhile", memcached(3, 1, metav1.ConditionTrue), Observation{StatefulSet: deployment(3, 1, 10*time.Second)}, 20 * time.Second},
		{"scaled 40 s ago: the rollout is slow, its progress is written", memcached(3, 1, metav1.ConditionTrue), Observation{StatefulSet: deployment(3, 1, 40*time.Second)}, 0},
		{"serving no more", memcached(3, 1, metav1.ConditionTrue), Observation{StatefulSet: deployment(3, 0, 10*time.Second)}, 0},
		{"rolling out for a generation the status already names (a Secret rotated)", memcached(3, 2, metav1.ConditionTrue), Observation{StatefulSet: deployment(3, 1, 10*time.Second)}, 0},
		{"replacing a Deployment", memcached(3, 1, metav1.ConditionTrue), Observation{StatefulSet: deployment(3, 1, 10*time.Second), Replacing: "replacing"}, 0},
		{"scaled 10 s ago, its pods ready, keys moving", memcached(4, 1, metav1.ConditionTrue), Observation{StatefulSet: deployment(4, 4, 10*time.Second), Moving: "Moving keys from 3 to 4 slots"}, 0},
		{"changed 10 s ago, serving meanwhile, pods to restart empty", memcached(3, 1, metav1.ConditionTrue), Observation{StatefulSet: deployment(3, 1, 10*time.Second), Rolling: "2 pods to change in place with memcached restarting empty", RollingEmpties: true}, 0},
		{"no StatefulSet", memcached(3, 1, metav1.ConditionTrue), Observation{}, 0},
		{"changed in this reconcile, not observed yet", memcached(1, 1, metav1.ConditionTrue), Observation{StatefulSet: unobserved, StatefulSetChanged: true}, reportTimeout},
		{"scaled 10 s ago, serving meanwhile, a new pod cannot be scheduled", memcached(3, 1, metav1.ConditionTrue), Observation{StatefulSet: deployment(3, 1, 10*time.Second), Pods: []*owned.Pod{pod("cache-5d8f-a", unschedulabl)}}, 0},
		{"scaled 10 s ago, serving meanwhile, a new pod's image cannot be pulled", memcached(3, 1, metav1.ConditionTrue), Observation{StatefulSet: deployment(3, 1, 10*time.Second), Pods: []*owned.Pod{pod("cache-5d8f-a", pullFailed)}}, 0},
		{"scaled 10 s ago, serving meanwhile, a quota refuses the new pods", memcached(3, 1, metav1.ConditionTrue), Observation{StatefulSet: deployment(3, 1, 10*time.Second), CreateFailed: "exceeded quota"}, 0},
		{"scaled 10 s ago, serving meanwhile, a new pod starting", memcached(3, 1, metav1.ConditionTrue), Observation{StatefulSet: deployment(3, 1, 10*time.Second), Pods: []*owned.Pod{pod("cache-5d8f-a", starting)}}, 20 * time.Second},
		{"changed in this reconcile, not observed yet, and a phase failed", memcached(1, 1, metav1.ConditionTrue), Observation{StatefulSet: unobserved, StatefulSetChanged: true, Failed: []error{errors.New("applying Service cache: forbidden")}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(Hold(tt.m, tt.obs, now)).To(Equal(tt.want))
		})
	}
}
