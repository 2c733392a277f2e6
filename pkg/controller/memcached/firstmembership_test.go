package memcached

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/discovery"
)

// A new Memcached with spec.keyMoves publishes its membership whole once
// every slot has a ready pod; a slot late past wholeMembershipWait after
// the creation keeps the others from no client: those with a ready pod are
// published. Until something is published, the status is told why.
func TestTheFirstMembershipWaitsForEverySlotWithinABound(t *testing.T) {
	created := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	node := func(k int) discovery.Node {
		return discovery.Node{Host: []string{"c-0.c.ns.svc", "c-1.c.ns.svc"}[k], IP: []string{"10.0.0.1", "10.0.0.2"}[k], Port: 11211}
	}
	one := discovery.Cluster{Version: 1, Nodes: []discovery.Node{node(0)}}
	both := discovery.Cluster{Version: 1, Nodes: []discovery.Node{node(0), node(1)}}
	for _, tc := range []struct {
		name        string
		after       time.Duration
		target      discovery.Cluster
		nodes       int
		requeue     time.Duration
		unpublished string
	}{
		{"every slot ready at once: whole", time.Second, both, 2, 0, ""},
		{"one of two ready, within the wait: none yet", 10 * time.Second, one, 0, 20 * time.Second, "1 of 2 slots have a ready pod; it is published once all have, or in 20s with those"},
		{"one of two ready, past the wait: that one", wholeMembershipWait, one, 1, 0, ""},
		{"none ready, long after: none", time.Hour, discovery.Cluster{Version: 1}, 0, 0, "0 of 2 slots have a ready pod; it is published once all have"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			now := created.Add(tc.after)
			s := &scope{
				Reconciler: &Reconciler{Now: func() time.Time { return now }},
				m: &cachev1alpha1.Memcached{
					ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", CreationTimestamp: metav1.NewTime(created)},
					Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2), KeyMoves: &cachev1alpha1.KeyMovesSpec{}},
				},
			}
			published, plan, res, err := s.moveStep(context.Background(), membershipState{}, tc.target, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(plan).To(BeEmpty(), "no key moves")
			g.Expect(published.Nodes).To(HaveLen(tc.nodes))
			g.Expect(res.RequeueAfter).To(Equal(tc.requeue))
			if tc.unpublished == "" {
				g.Expect(s.obs.Unpublished).To(BeEmpty())
			} else {
				g.Expect(s.obs.Unpublished).To(HaveSuffix(tc.unpublished))
			}
		})
	}
}
