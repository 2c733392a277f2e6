package memcached

import (
	"context"
	"time"

	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/ring"
)

// Two pods deleted at once, the second seen once the move handing the
// first off has begun: the move is made anew to the membership without
// both before anything is published, as each pod hands its keys to the
// slot that stays (each hears from the other that it is leaving), and it
// is published once both pods said they copied from the membership they
// leave.
func TestASecondPodDeletedDuringAHandOffJoinsItsMove(t *testing.T) {
	g := NewWithT(t)
	node := func(k int) discovery.Node {
		return discovery.Node{Host: desired.SlotHost("c", "ns", k), IP: "10.0.0." + string(rune('1'+k)), Port: 11211}
	}
	from := discovery.Cluster{Version: 3, Nodes: []discovery.Node{node(0), node(1), node(2)}}
	first := discovery.Cluster{Version: 4, Nodes: []discovery.Node{node(1), node(2)}}
	started := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	plan := move.Plan{ID: 4, Ring: ring.Libmemcached, Step: move.StepCopy, From: string(from.Body()), To: string(first.Body()), Started: started, Stepped: started}
	logs := logsOf{}
	s := &scope{
		Reconciler: &Reconciler{Logs: logs, Recorder: events.NewFakeRecorder(10), Now: func() time.Time { return started.Add(time.Second) },
			Images: desired.Images{Reloader: "operator"}},
		m: &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Spec: cachev1alpha1.MemcachedSpec{
			Size: ptr.To[int32](3), KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: string(ring.Libmemcached)}}},
	}
	s.obs.Pods = []*owned.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "c-0", Namespace: "ns"}, IP: "10.0.0.1", Deleting: true},
		{ObjectMeta: metav1.ObjectMeta{Name: "c-1", Namespace: "ns"}, IP: "10.0.0.2", Deleting: true},
		{ObjectMeta: metav1.ObjectMeta{Name: "c-2", Namespace: "ns"}, IP: "10.0.0.3", Ready: true},
	}
	addrs := map[string]desired.PodAddress{"c-2": {IP: "10.0.0.3", Port: 11211}}
	target := desired.Membership(s.m, addrs, from, s.leaving()...)
	g.Expect(target.Nodes).To(Equal([]discovery.Node{node(2)}))
	st := membershipState{published: from, plan: &plan, from: from, to: first}

	published, planned, _, err := s.moveStep(context.Background(), st, target, addrs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(published).To(Equal(from), "nothing is published before the pods copied")
	p, pFrom, pTo, err := move.ParsePlan([]byte(planned))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Step).To(Equal(move.StepCopy))
	g.Expect(p.ID).To(BeNumerically(">", plan.ID), "a move of its own: the pods do each move's steps once")
	g.Expect(pTo.Version).To(Equal(p.ID))
	g.Expect(pFrom).To(Equal(from))
	g.Expect(pTo.Nodes).To(Equal([]discovery.Node{node(2)}))

	// Both pods said they copied from the membership they leave; the
	// slot that stays copied nothing in the new move.
	logs["c-0"] = handOffLog(from.Version, move.MembersDigest(from))
	logs["c-1"] = handOffLog(from.Version, move.MembersDigest(from))
	// c-2's word, as a follower that holds nothing to copy says it.
	logs["c-2"] = followerLog(t, "c-2", move.Plan{ID: p.ID, Ring: ring.Libmemcached, Step: move.StepCopy,
		From: string(discovery.Cluster{Version: 1, Nodes: []discovery.Node{{Host: "other.c.ns.svc", IP: "10.0.0.9", Port: 11211}}}.Body()), To: p.To})
	st = membershipState{published: from, plan: &p, from: from, to: pTo}
	published, planned, _, err = s.moveStep(context.Background(), st, target, addrs)
	g.Expect(err).NotTo(HaveOccurred())
	p, _, _, err = move.ParsePlan([]byte(planned))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Step).To(Equal(move.StepPublished))
	g.Expect(published.Nodes).To(Equal([]discovery.Node{node(2)}))
}
