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

// handOffLog is a leaving pod's log of its hand-off's copy from the
// membership of version from and members (their digest).
func handOffLog(from int64, members string) []byte {
	var b bytes.Buffer
	podlog.Write(slog.New(slog.NewJSONHandler(&b, nil)), slog.LevelInfo,
		podlog.Step{Msg: podlog.CopiedMessage, Move: from, Step: move.HandOffStep, Server: "c-1.c.ns.svc", Copied: 10, Members: members})
	return b.Bytes()
}

// A pod deleted by another hand (an eviction, a drain, a delete) hands its
// keys off itself, in its preStop hooks: its slot is left out of the
// membership, and the copy step of the move to the membership without it
// waits for the word of its hand-off (of the membership it leaves), as for
// a follower's, rather than passing it by as a pod that does not run.
func TestADeletedPodsHandOffIsWaitedFor(t *testing.T) {
	g := NewWithT(t)
	from := discovery.Cluster{Version: 3, Nodes: []discovery.Node{
		{Host: desired.SlotHost("c", "ns", 0), IP: "10.0.0.1", Port: 11211}, {Host: desired.SlotHost("c", "ns", 1), IP: "10.0.0.2", Port: 11211}}}
	to := discovery.Cluster{Version: 4, Nodes: from.Nodes[:1]}
	started := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	plan := move.Plan{ID: 4, Ring: ring.Libmemcached, Step: move.StepCopy, From: string(from.Body()), To: string(to.Body()), Started: started, Stepped: started}
	// c-0's word, as a follower that holds nothing to copy says it.
	copied := copiedNothing(t, "c-0", 4, plan.To)
	elsewhere := discovery.Cluster{Version: 2, Nodes: []discovery.Node{from.Nodes[0], {Host: from.Nodes[1].Host, IP: "10.0.0.7", Port: 11211}}}
	logs := logsOf{"c-0": copied, "c-1": handOffLog(elsewhere.Version, move.MembersDigest(elsewhere))}
	recorder := events.NewFakeRecorder(10)
	s := &scope{
		Reconciler: &Reconciler{Logs: logs, Recorder: recorder, Now: func() time.Time { return started.Add(time.Minute) },
			Images: desired.Images{Reloader: "operator"}},
		m: &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Spec: cachev1alpha1.MemcachedSpec{
			Size: ptr.To[int32](2), KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: string(ring.Libmemcached)}}},
	}
	s.obs.Pods = []*owned.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "c-0", Namespace: "ns"}, IP: "10.0.0.1", Ready: true},
		{ObjectMeta: metav1.ObjectMeta{Name: "c-1", Namespace: "ns"}, IP: "10.0.0.2", Deleting: true},
	}
	g.Expect(s.leaving()).To(ConsistOf(desired.SlotHost("c", "ns", 1)))
	g.Expect(desired.Membership(s.m, map[string]desired.PodAddress{"c-0": {IP: "10.0.0.1", Port: 11211}}, from, s.leaving()...).Nodes).To(Equal(to.Nodes))
	st := membershipState{published: from, plan: &plan, from: from, to: to}

	_, planned, _, err := s.moveStep(context.Background(), st, to, nil)
	g.Expect(err).NotTo(HaveOccurred())
	p, _, _, err := move.ParsePlan([]byte(planned))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Step).To(Equal(move.StepCopy), "c-1's word is of another membership")
	g.Expect(recorder.Events).To(BeEmpty())

	// Its word of the membership published, or of an older version of the
	// same members (its mounted membership lagged behind).
	for _, said := range [][]byte{handOffLog(from.Version, move.MembersDigest(from)), handOffLog(from.Version-1, move.MembersDigest(from))} {
		logs["c-1"] = said
		published, planned, _, err := s.moveStep(context.Background(), st, to, nil)
		g.Expect(err).NotTo(HaveOccurred())
		p, _, _, err = move.ParsePlan([]byte(planned))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Step).To(Equal(move.StepPublished), "c-1 said it copied: %s", said)
		g.Expect(published.Nodes).To(Equal(to.Nodes))
		g.Expect(recorder.Events).To(BeEmpty())
	}
}

// A slot's hand-off starts only once the slot handed off before is back
// in the membership published, by a move of its own; one under way or
// done goes on.
func TestTheNextHandOffWaitsForTheSlotBeforeToComeBack(t *testing.T) {
	host := func(k int) string { return desired.SlotHost("c", "ns", k) }
	node := func(k int) discovery.Node {
		return discovery.Node{Host: host(k), IP: fmt.Sprintf("10.0.0.%d", k+1), Port: 11211}
	}
	all := discovery.Cluster{Version: 5, Nodes: []discovery.Node{node(0), node(1), node(2)}}
	without := func(ks ...int) discovery.Cluster {
		c := discovery.Cluster{Version: 5}
		for k := range 3 {
			if !slices.Contains(ks, k) {
				c.Nodes = append(c.Nodes, node(k))
			}
		}
		return c
	}
	plan := &move.Plan{ID: 6}
	others := []string{host(0), host(2)}
	tests := []struct {
		name string
		st   membershipState
		want bool
	}{
		{"every slot in the membership, no move", membershipState{published: all}, true},
		{"the slot before handed off, not back", membershipState{published: without(2)}, false},
		{"the slot before coming back in a move", membershipState{published: without(2), plan: plan, to: all}, false},
		{"a move that does not hand this slot off", membershipState{published: all, plan: plan, to: without(2)}, false},
		{"this slot's hand-off under way", membershipState{published: all, plan: plan, to: without(1)}, true},
		{"this slot handed off", membershipState{published: without(1)}, true},
		{"this slot's hand-off under way with the slot before's return", membershipState{published: without(2), plan: plan, to: without(1)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := handOffMayStart(tt.st, host(1), others); got != tt.want {
				t.Fatalf("handOffMayStart = %v, want %v", got, tt.want)
			}
		})
	}
}
