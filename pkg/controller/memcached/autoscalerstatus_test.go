package memcached

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/autoscale"
	"github.com/example/memcached-operator/pkg/owned"
)

// The status tells the autoscaler's decision, not its readings: a
// Memcached is reconciled for its status when the decision's cause
// changes, never because a reading did.
func TestTheAutoscalersStatusChangesWithItsDecisionOnly(t *testing.T) {
	g := NewWithT(t)
	m := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache", Generation: 2},
		Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2), KeyMoves: &cachev1alpha1.KeyMovesSpec{},
			Autoscaling: &cachev1alpha1.AutoscalingSpec{MinSize: 1, MaxSize: 3, ScaleUpSeconds: ptr.To[int32](60)}},
		Status: cachev1alpha1.MemcachedStatus{ObservedGeneration: 2, ReadyReplicas: 2},
	}
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: cachev1alpha1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: "RolloutComplete"})
	clock := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	evictions := map[string]uint64{}
	step := uint64(10) // a minute per slot: under the target of 60, over a quarter of it
	enqueued := 0
	a := &Autoscaler{
		Now:     func() time.Time { return clock },
		Enqueue: func(types.NamespacedName) { enqueued++ },
		Pods: func(*cachev1alpha1.Memcached) ([]*owned.Pod, error) {
			return []*owned.Pod{
				{ObjectMeta: metav1.ObjectMeta{Name: "cache-0", UID: "a"}, IP: "0", Ready: true},
				{ObjectMeta: metav1.ObjectMeta{Name: "cache-1", UID: "b"}, IP: "1", Ready: true},
			}, nil
		},
		// Called for each pod at once.
		Read: func(_ context.Context, ip string, _ int64) (autoscale.Signals, error) {
			mu.Lock()
			defer mu.Unlock()
			evictions[ip] += step
			return autoscale.Signals{Time: clock.Unix(), Uptime: clock.Unix(), Evictions: evictions[ip], GetHits: evictions[ip] * 3, LimitMaxbytes: 64 << 20, WorkingSetBytes: -1}, nil
		},
	}
	poll := func() *autoscale.Decision {
		clock = clock.Add(time.Minute)
		a.poll(context.Background(), m, a.stateOf(types.NamespacedName{Namespace: "ns", Name: "cache"}))
		return &a.stateOf(types.NamespacedName{Namespace: "ns", Name: "cache"}).shown
	}
	g.Expect(poll().Cause).To(Equal("not all slots read"))
	g.Expect(enqueued).To(Equal(1))
	g.Expect(poll().Cause).To(Equal("steady"))
	first := a.Status(types.NamespacedName{Namespace: "ns", Name: "cache"})
	for range 5 {
		step += 8 // other readings (up to 50), the same decision
		poll()
	}
	g.Expect(enqueued).To(Equal(2), "reconciled for a reading")
	g.Expect(a.Status(types.NamespacedName{Namespace: "ns", Name: "cache"})).To(Equal(first))
	step = 1000
	g.Expect(poll().Cause).To(Equal("over target, window running"))
	g.Expect(enqueued).To(Equal(3))
	g.Expect(*a.Status(types.NamespacedName{Namespace: "ns", Name: "cache"}).Next).To(Equal(autoscale.ScaleUp))
}
