package memcached

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/podlog"
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
	from := discovery.Cluster{Version: 3, Nodes: []discovery.Node{slotNode(0), slotNode(1), slotNode(2)}}
	first := discovery.Cluster{Version: 4, Nodes: []discovery.Node{slotNode(1), slotNode(2)}}
	s, logs := threeSlots(0, 1)
	plan := move.Plan{ID: 4, Ring: ring.Libmemcached, Step: move.StepCopy, From: string(from.Body()), To: string(first.Body()), Started: s.now(), Stepped: s.now()}
	addrs := map[string]desired.PodAddress{"c-2": {IP: "10.0.0.3", Port: 11211}}
	target := desired.Membership(s.m, addrs, from, s.leaving()...)
	g.Expect(target.Nodes).To(Equal([]discovery.Node{slotNode(2)}))
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
	g.Expect(pTo.Nodes).To(Equal([]discovery.Node{slotNode(2)}))

	// Both pods said they copied from the membership they leave; the
	// slot that stays copied nothing in the new move.
	logs["c-0"] = handOffLog(from.Version, move.MembersDigest(from))
	logs["c-1"] = handOffLog(from.Version, move.MembersDigest(from))
	// c-2's word, as a follower that holds nothing to copy says it.
	logs["c-2"] = copiedNothing(t, "c-2", p.ID, p.To)
	st = membershipState{published: from, plan: &p, from: from, to: pTo}
	published, planned, _, err = s.moveStep(context.Background(), st, target, addrs)
	g.Expect(err).NotTo(HaveOccurred())
	p, _, _, err = move.ParsePlan([]byte(planned))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Step).To(Equal(move.StepPublished))
	g.Expect(published.Nodes).To(Equal([]discovery.Node{slotNode(2)}))
}

// A pod deleted before it was told of the membership without a slot
// handed off just before (a second or two after its publication) hands
// off from the membership that lists both: it leaves the other slot out,
// as that one says it is leaving, and copies onto the slot that stays. The
// next move, from the membership published to the one without both, counts
// its word by the members it copied onto; copies onto other members are
// not counted.
func TestAPodDeletedBeforeItWasToldOfAHandOffCountsByWhereItCopied(t *testing.T) {
	g := NewWithT(t)
	all := discovery.Cluster{Version: 3, Nodes: []discovery.Node{slotNode(0), slotNode(1), slotNode(2)}}
	published := discovery.Cluster{Version: 4, Nodes: []discovery.Node{slotNode(1), slotNode(2)}}
	s, logs := threeSlots(0, 1)
	addrs := map[string]desired.PodAddress{"c-2": {IP: "10.0.0.3", Port: 11211}}
	target := desired.Membership(s.m, addrs, published, s.leaving()...)
	g.Expect(target.Nodes).To(Equal([]discovery.Node{slotNode(2)}))
	p := move.Plan{ID: target.Version, Ring: ring.Libmemcached, Step: move.StepCopy, From: string(published.Body()), To: string(target.Body()),
		Started: s.now(), Stepped: s.now()}
	st := membershipState{published: published, plan: &p, from: published, to: target}
	logs["c-2"] = copiedNothing(t, "c-2", p.ID, p.To)
	onto := func(c discovery.Cluster) []byte {
		var b bytes.Buffer
		podlog.Write(slog.New(slog.NewJSONHandler(&b, nil)), slog.LevelInfo, podlog.Step{Msg: podlog.CopiedMessage, Move: all.Version,
			Step: move.HandOffStep, Server: slotNode(1).Host, Copied: 10, Members: move.MembersDigest(all), Onto: move.MembersDigest(c)})
		return b.Bytes()
	}

	logs["c-1"] = onto(discovery.Cluster{Nodes: []discovery.Node{slotNode(0), slotNode(2)}})
	_, planned, _, err := s.moveStep(context.Background(), st, target, addrs)
	g.Expect(err).NotTo(HaveOccurred())
	next, _, _, err := move.ParsePlan([]byte(planned))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(next.Step).To(Equal(move.StepCopy), "c-1 copied onto a slot that is leaving")

	logs["c-1"] = onto(target)
	now, planned, _, err := s.moveStep(context.Background(), st, target, addrs)
	g.Expect(err).NotTo(HaveOccurred())
	next, _, _, err = move.ParsePlan([]byte(planned))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(next.Step).To(Equal(move.StepPublished), "c-1 copied onto the slot that stays")
	g.Expect(now.Nodes).To(Equal([]discovery.Node{slotNode(2)}))
}

// slotNode is the membership's node of slot k of the Memcached threeSlots
// makes.
func slotNode(k int) discovery.Node {
	return discovery.Node{Host: desired.SlotHost("c", "ns", k), IP: "10.0.0." + string(rune('1'+k)), Port: 11211}
}

// threeSlots is a scope of a Memcached c of three slots that moves keys,
// whose pods of the slots deleting are being deleted, at a moment of
// 2026-12-07, and the pods' logs it reads.
func threeSlots(deleting ...int) (*scope, logsOf) {
	started := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	logs := logsOf{}
	s := &scope{
		Reconciler: &Reconciler{Logs: logs, Recorder: events.NewFakeRecorder(10), Now: func() time.Time { return started.Add(time.Second) },
			Images: desired.Images{Reloader: "operator"}},
		m: &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Spec: cachev1alpha1.MemcachedSpec{
			Size: ptr.To[int32](3), KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: string(ring.Libmemcached)}}},
	}
	for k := range 3 {
		s.obs.Pods = append(s.obs.Pods, &owned.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c-%d", k), Namespace: "ns"},
			IP: slotNode(k).IP, Deleting: slices.Contains(deleting, k), Ready: !slices.Contains(deleting, k)})
	}
	return s, logs
}
