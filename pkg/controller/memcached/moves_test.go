package memcached

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/podlog"
	"github.com/example/memcached-operator/pkg/ring"
)

// followerLog is what a move.Follower running as pod host logs of plan.
func followerLog(t *testing.T, host string, plan move.Plan) []byte {
	t.Helper()
	file := filepath.Join(t.TempDir(), "move")
	if err := os.WriteFile(file, []byte(plan.Marshal()), 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	f := &move.Follower{Mover: &move.Mover{}, PlanFile: file, Host: host, Local: "127.0.0.1:1", Log: slog.New(slog.NewJSONHandler(&log, nil))}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	f.Run(ctx)
	return log.Bytes()
}

// The operator reads what the pods' followers say, in their own words: a
// slot new to the membership copies nothing and says so; a plan it cannot
// follow is a failure, with its cause; another move's or step's word is
// not this one's.
func TestTheOperatorReadsTheFollowersWord(t *testing.T) {
	g := NewWithT(t)
	from := discovery.Cluster{Version: 1, Nodes: []discovery.Node{{Host: "c-0.c.ns.svc", IP: "10.0.0.1", Port: 11211}}}
	to := discovery.Cluster{Version: 2, Nodes: append(from.Nodes, discovery.Node{Host: "c-1.c.ns.svc", IP: "10.0.0.2", Port: 11211})}
	plan := move.Plan{ID: 2, Ring: ring.Libmemcached, Step: move.StepCopy, From: string(from.Body()), To: string(to.Body())}

	log := followerLog(t, "c-1", plan)
	said, ok := podlog.LastStep(log, 2, move.StepCopy, podlog.CopiedMessage)
	g.Expect(ok).To(BeTrue(), "the new slot's word: %s", log)
	g.Expect(said.Failed()).To(BeFalse())
	_, ok = podlog.LastStep(log, 3, move.StepCopy, podlog.CopiedMessage)
	g.Expect(ok).To(BeFalse(), "another move")
	_, ok = podlog.LastStep(log, 2, move.StepSettle, podlog.SettledMessage)
	g.Expect(ok).To(BeFalse(), "another step")

	plan.Ring = "bogus"
	log = followerLog(t, "c-0", plan)
	said, ok = podlog.LastStep(log, 2, move.StepCopy, podlog.CopiedMessage)
	g.Expect(ok).To(BeTrue(), "%s", log)
	g.Expect(said.Failed()).To(BeTrue())
	g.Expect(said.Error).NotTo(BeEmpty())
}

// A held membership keeps its slots and follows their pods' addresses.
func TestAHeldMembershipFollowsTheAddresses(t *testing.T) {
	g := NewWithT(t)
	c := discovery.Cluster{Version: 4, Nodes: []discovery.Node{{Host: "c-0.c.ns.svc", IP: "10.0.0.1", Port: 11211}, {Host: "c-1.c.ns.svc", IP: "10.0.0.2", Port: 11211}}}
	g.Expect(held(c, map[string]desired.PodAddress{"c-0": {IP: "10.0.0.1", Port: 11211}, "c-2": {IP: "10.0.0.3", Port: 11211}})).To(Equal(c))
	moved := held(c, map[string]desired.PodAddress{"c-1": {IP: "10.0.0.9", Port: 11211}})
	g.Expect(moved.Version).To(Equal(int64(5)))
	g.Expect(moved.Nodes[1].IP).To(Equal("10.0.0.9"))
	reported := held(c, map[string]desired.PodAddress{"c-1": {IP: "10.0.0.2", Port: 11311}})
	g.Expect(reported.Version).To(Equal(int64(5)), "a pod replaced onto a new port")
	g.Expect(reported.Nodes[1].Port).To(Equal(int32(11311)))
	g.Expect(held(c, map[string]desired.PodAddress{"c-1": {IP: "10.0.0.2"}})).To(Equal(c), "a pod that names no port keeps the node's")
	g.Expect(c.Nodes[1].IP).To(Equal("10.0.0.2"), "c itself unchanged")
	g.Expect(sameHosts(c, moved)).To(BeTrue())
	g.Expect(sameHosts(c, discovery.Cluster{Nodes: c.Nodes[:1]})).To(BeFalse())
}

// logsOf is pods' logs, by pod name.
// copiedNothing is host's word of the copy step of move id to the
// membership to (its body), as a follower that holds none of the keys of
// the membership the move leaves says it.
func copiedNothing(t *testing.T, host string, id int64, to string) []byte {
	t.Helper()
	return followerLog(t, host, move.Plan{ID: id, Ring: ring.Libmemcached, Step: move.StepCopy,
		From: string(discovery.Cluster{Version: 1, Nodes: []discovery.Node{{Host: "other.c.ns.svc", IP: "10.0.0.9", Port: 11211}}}.Body()), To: to})
}

type logsOf map[string][]byte

func (l logsOf) Read(_ context.Context, _, pod string, _ *corev1.PodLogOptions) ([]byte, error) {
	return l[pod], nil
}

// copyOfTwoSlots is the copy step of a move from slots c-0 and c-1 to c-0
// alone, begun at its plan's Started, and c-0's word of it: c-1 has said
// nothing.
func copyOfTwoSlots(t *testing.T) (st membershipState, to discovery.Cluster, copied []byte) {
	t.Helper()
	from := discovery.Cluster{Version: 3, Nodes: []discovery.Node{
		{Host: "c-0.c.ns.svc", IP: "10.0.0.1", Port: 11211}, {Host: "c-1.c.ns.svc", IP: "10.0.0.2", Port: 11211}}}
	to = discovery.Cluster{Version: 4, Nodes: from.Nodes[:1]}
	started := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	plan := move.Plan{ID: 4, Ring: ring.Libmemcached, Step: move.StepCopy, From: string(from.Body()), To: string(to.Body()), Started: started, Stepped: started}
	// A follower that holds none of from's keys copies nothing and says so.
	copied = copiedNothing(t, "c-0", 4, plan.To)
	return membershipState{published: from, plan: &plan, from: from, to: to}, to, copied
}

// A copy waits for every pod's word, and no longer than moveStepBound: a
// pod still silent then is left behind, and a Warning event names it.
func TestACopyWaitsForThePodsWithinItsBound(t *testing.T) {
	g := NewWithT(t)
	st, to, copied := copyOfTwoSlots(t)
	started := st.plan.Started
	now := started.Add(time.Minute)
	recorder := events.NewFakeRecorder(10)
	s := &scope{
		Reconciler: &Reconciler{Logs: logsOf{"c-0": copied}, Recorder: recorder, Now: func() time.Time { return now }},
		m:          &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}},
	}
	for _, name := range []string{"c-0", "c-1"} {
		s.obs.Pods = append(s.obs.Pods, &owned.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, IP: "10.0.0.1"})
	}

	_, planned, _, err := s.moveStep(context.Background(), st, to, nil)
	g.Expect(err).NotTo(HaveOccurred())
	p, _, _, err := move.ParsePlan([]byte(planned))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Step).To(Equal(move.StepCopy), "c-1 has not copied yet")
	g.Expect(recorder.Events).To(BeEmpty())

	now = started.Add(moveStepBound)
	published, planned, _, err := s.moveStep(context.Background(), st, to, nil)
	g.Expect(err).NotTo(HaveOccurred())
	p, _, _, err = move.ParsePlan([]byte(planned))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Step).To(Equal(move.StepPublished), "published once the bound passed")
	g.Expect(published.Nodes).To(HaveLen(1))
	g.Expect(recorder.Events).To(Receive(And(ContainSubstring(eventKeyMoveIncomplete), ContainSubstring("c-1"))))
}

// What the membership ConfigMap holds counts only as far as a seal the
// operator published, or one its pods carry, vouches for it: a plan merged
// in by another hand is no plan, a membership no seal vouches for is none.
func TestOnlyASealedMembershipOrPlanIsFollowed(t *testing.T) {
	published := discovery.Cluster{Version: 3, Nodes: []discovery.Node{
		{Host: "c-0.c.ns.svc", IP: "10.0.0.1", Port: 11211}, {Host: "c-1.c.ns.svc", IP: "10.0.0.2", Port: 11211}}}
	forgedTo := discovery.Cluster{Version: 4, Nodes: append(slices.Clone(published.Nodes), discovery.Node{Host: "c-9.c.ns.svc", IP: "192.0.2.7", Port: 11211})}
	forged := move.Plan{ID: 4, Ring: ring.Libmemcached, Step: move.StepCopy, From: string(published.Body()), To: string(forgedTo.Body())}.Marshal()
	current := &owned.Summary{Membership: string(published.Body()), Move: forged}
	tests := []struct {
		name      string
		trusted   []discovery.Seal
		published bool
		plan      bool
	}{
		{name: "no seal", trusted: nil},
		{name: "the operator published no plan", trusted: []discovery.Seal{discovery.SealOf(published.Body(), nil)}, published: true},
		{name: "a seal of another membership", trusted: []discovery.Seal{discovery.SealOf(forgedTo.Body(), []byte(forged))}},
		{name: "the operator published the plan", trusted: []discovery.Seal{discovery.SealOf(published.Body(), []byte(forged))}, published: true, plan: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			st := membershipOf(current, publications{seals: tt.trusted, version: published.Version})
			g.Expect(st.published.Nodes).To(HaveLen(map[bool]int{true: 2}[tt.published]))
			g.Expect(st.published.Version).To(Equal(published.Version), "the version counts on, sealed or not")
			g.Expect(st.plan != nil).To(Equal(tt.plan))
			want := map[bool]int32{false: 2, true: 10}[tt.plan]
			g.Expect(slotsOf("c", 2, st)).To(Equal(want), "the StatefulSet's replicas")
		})
	}
}

// The version of a membership no seal vouches for is the highest the
// operator told its pods, not the one written there: another hand cannot
// send it back (clients would keep an older one) or past what the next
// can count on from.
func TestAnUnsealedMembershipsVersionIsTheOperators(t *testing.T) {
	g := NewWithT(t)
	for _, v := range []int64{1, math.MaxInt64} {
		forged := discovery.Cluster{Version: v, Nodes: []discovery.Node{{Host: "c-0.c.ns.svc", IP: "192.0.2.7", Port: 11211}}}
		st := membershipOf(&owned.Summary{Membership: string(forged.Body())}, publications{version: 7})
		g.Expect(st.published.Version).To(Equal(int64(7)), "forged at version %d", v)
		g.Expect(st.published.Nodes).To(BeEmpty())
	}
}

// The operator's word is what it last published, and what its pods were
// told, an operator before seals included (the version alone).
func TestWhatThePodsWereToldIsTheOperatorsWord(t *testing.T) {
	g := NewWithT(t)
	seal := discovery.SealOf([]byte("9\n\n"), nil)
	s := &scope{Reconciler: &Reconciler{}, m: &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u"}}}
	s.obs.Pods = []*owned.Pod{
		{MembershipVersion: "7"},
		{MembershipVersion: "9 (move 9: copy)", MembershipSeal: seal.String()},
		{MembershipSeal: "forged"},
	}
	g.Expect(s.told()).To(Equal(publications{seals: []discovery.Seal{seal}, version: 9}))
	s.publishedSeals.Store(client.ObjectKeyFromObject(s.m), publishedSeal{uid: "u", seal: discovery.SealOf([]byte("10\n\n"), nil), version: 10})
	g.Expect(s.told().version).To(Equal(int64(10)))
	g.Expect(s.told().seals).To(HaveLen(2))
}

// A move, even the operator's, never sizes the StatefulSet past MaxSize.
func TestSlotsStayWithinMaxSize(t *testing.T) {
	g := NewWithT(t)
	far := discovery.Cluster{Version: 2, Nodes: []discovery.Node{
		{Host: "c-0.c.ns.svc", IP: "10.0.0.1", Port: 11211}, {Host: "c-2147483646.c.ns.svc", IP: "10.0.0.2", Port: 11211}}}
	g.Expect(slotsOf("c", 3, membershipState{published: far, from: far, to: far})).To(Equal(int32(3)))
	edge := discovery.Cluster{Version: 2, Nodes: []discovery.Node{{Host: fmt.Sprintf("c-%d.c.ns.svc", cachev1alpha1.MaxSize-1), IP: "10.0.0.1", Port: 11211}}}
	g.Expect(slotsOf("c", 3, membershipState{published: edge})).To(Equal(int32(cachev1alpha1.MaxSize)))
}

// Once the new membership is published, the keys stay on their old slots
// until the clients have polled it (spec.keyMoves.clientPollSeconds): a
// client still on the old membership reads them there meanwhile. Only
// then do the pods settle.
func TestTheSettleWaitsForTheClientsPoll(t *testing.T) {
	g := NewWithT(t)
	st, to, _ := copyOfTwoSlots(t)
	published := st.plan.Started.Add(10 * time.Second)
	plan := *st.plan
	plan.Step, plan.Stepped = move.StepPublished, published
	st.plan, st.published = &plan, to
	now := published
	s := &scope{
		Reconciler: &Reconciler{Logs: logsOf{}, Recorder: events.NewFakeRecorder(10), Now: func() time.Time { return now }},
		m: &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
			Spec: cachev1alpha1.MemcachedSpec{KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: string(ring.Libmemcached), ClientPollSeconds: ptr.To[int32](3)}}},
	}
	step := func() (move.Plan, time.Duration) {
		t.Helper()
		_, planned, res, err := s.moveStep(context.Background(), st, to, nil)
		g.Expect(err).NotTo(HaveOccurred())
		p, _, _, err := move.ParsePlan([]byte(planned))
		g.Expect(err).NotTo(HaveOccurred())
		return p, res.RequeueAfter
	}

	now = published.Add(2900 * time.Millisecond)
	p, after := step()
	g.Expect(p.Step).To(Equal(move.StepPublished), "the clients have not polled yet")
	g.Expect(after).To(Equal(100*time.Millisecond), "looked at again once they have")

	now = published.Add(3 * time.Second)
	p, _ = step()
	g.Expect(p.Step).To(Equal(move.StepSettle), "settled after the clients' poll")
	g.Expect(p.Stepped).To(Equal(now))
}
