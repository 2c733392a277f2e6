//go:build integration

package move_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/podlog"
	"github.com/example/memcached-operator/pkg/ring"
)

// leaver is the last slot's Leaver, logging to log.
func (s *handOffSlots) leaver(dir string, wait time.Duration, log *syncBuffer) *move.Leaver {
	return s.leaverOf(s.last, dir, wait, log)
}

// leaverOf is slot i's Leaver, logging to log.
func (s *handOffSlots) leaverOf(i int, dir string, wait time.Duration, log *syncBuffer) *move.Leaver {
	f := s.followers[i]
	f.Log = slog.New(slog.NewJSONHandler(log, nil))
	f.EndpointPort = s.port
	return &move.Leaver{
		Follower:        f,
		MembershipFile:  s.files[i],
		Ring:            ring.Libmemcached,
		ClientPoll:      300 * time.Millisecond,
		PublicationWait: wait,
		Dir:             dir,
		Poll:            50 * time.Millisecond,
	}
}

// reported waits for the leaver's report of msg.
func reported(t *testing.T, log *syncBuffer, msg string) podlog.Step {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if st, ok := podlog.LastStep(log.bytes(), 7, move.HandOffStep, msg); ok {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the leaver did not say %q:\n%s", msg, log.bytes())
	return podlog.Step{}
}

// keysOf are the keys key-0 … key-(n-1) the ring r gives one of servers.
func keysOf(r *ring.Ring, n int, servers ...string) map[string]bool {
	out := map[string]bool{}
	for i := range n {
		k := fmt.Sprintf("key-%d", i)
		for _, s := range servers {
			if r.Server(k) == s {
				out[k] = true
			}
		}
	}
	return out
}

// lost counts the keys that do not read their first value, v-key, on the
// server r gives each.
func (s *handOffSlots) lost(t *testing.T, r *ring.Ring, keys map[string]bool) int {
	t.Helper()
	lost := 0
	for k := range keys {
		if got := s.get(t, r, k); got != "v-"+k {
			lost++
		}
	}
	return lost
}

// onlyFirst is the membership of the first slot alone, which the
// operator publishes when the two others are handed off.
func (s *handOffSlots) onlyFirst(t *testing.T) (discovery.Cluster, *ring.Ring) {
	c := discovery.Cluster{Version: 8, Nodes: s.from.Nodes[:1]}
	return c, s.c.ring(t, move.Servers(c))
}

// TestTwoSlotsLeavingTogetherHandTheirKeysToTheSlotThatStays: two of three
// pods are deleted at the same moment. Each hands off to the membership it
// was told, which lists the other: without asking, each sent the other
// about half its keys, lost with the other's memory. Each says it is
// leaving before it asks its peers, so each of their keys reaches the slot
// that stays, with its value, once their memories are gone; each report
// names the members it copied onto.
func TestTwoSlotsLeavingTogetherHandTheirKeysToTheSlotThatStays(t *testing.T) {
	const n = 3000
	s := startHandOffSlots(t, n)
	logs := []*syncBuffer{{}, {}}
	var wg sync.WaitGroup
	for i, log := range logs {
		l := s.leaverOf(i+1, t.TempDir(), 30*time.Second, log)
		wg.Go(func() { l.HandOff(context.Background()) })
	}
	first, r := s.onlyFirst(t)
	for _, log := range logs {
		st := reported(t, log, podlog.CopiedMessage)
		if st.Failed() {
			t.Fatalf("copied: %+v", st)
		}
		// What the operator counts its word by, its mounted membership
		// one that lists the other.
		if st.Onto != move.MembersDigest(first) {
			t.Fatalf("the report says the keys went onto %q, not the slot that stays (%q)", st.Onto, move.MembersDigest(first))
		}
	}
	s.publish(t, 0, first)
	wg.Wait()
	for _, log := range logs {
		if st := reported(t, log, podlog.SettledMessage); st.Failed() {
			t.Fatalf("settled: %+v\n%s", st, log.bytes())
		}
	}
	for _, i := range []int{1, 2} {
		if err := s.c.clients[s.c.names[i]].FlushAll(); err != nil {
			t.Fatal(err)
		}
	}
	leaving := keysOf(s.before, n, move.Server(s.from.Nodes[1]), move.Server(s.from.Nodes[2]))
	if lost := s.lost(t, r, leaving); lost > 0 {
		t.Fatalf("%d of the two leaving slots' %d keys lost", lost, len(leaving))
	}
}

// TestKeysSentToASlotThatBeganLeavingAreCopiedAgain: the second slot begins
// leaving (its pod says so) while the last one, leaving, copies keys to
// it. Once its copy ends, the last slot asks again, and copies the keys it
// sent there to the membership without both: each reads from the slot
// that stays, but one a client rewrote on the leaving slot after its copy
// (a miss), and the report counts each key once.
func TestKeysSentToASlotThatBeganLeavingAreCopiedAgain(t *testing.T) {
	const n = 3000
	s := startHandOffSlots(t, n)
	var once sync.Once
	second := s.c.names[1]
	s.followers[2].Mover.Dial = func(ctx context.Context, address string) (net.Conn, error) {
		if address == second {
			once.Do(func() { move.SetLeaving(s.followers[1]) })
		}
		return plain(ctx, address)
	}
	log := &syncBuffer{}
	done := make(chan struct{})
	go func() { s.leaver(t.TempDir(), 30*time.Second, log).HandOff(context.Background()); close(done) }()
	copied := reported(t, log, podlog.CopiedMessage)
	leaving := keysOf(s.before, n, move.Server(s.from.Nodes[2]))
	if copied.Failed() || copied.Copied != len(leaving) {
		t.Fatalf("copied %+v, of the slot's %d keys", copied, len(leaving))
	}
	var rewritten string
	for k := range leaving {
		if s.aft.Server(k) == move.Server(s.from.Nodes[1]) {
			rewritten = k
			break
		}
	}
	s.set(t, s.before, rewritten, "newer")
	first, r := s.onlyFirst(t)
	s.publish(t, 0, first)
	<-done
	if st := reported(t, log, podlog.SettledMessage); st.Failed() || st.Invalidated != 1 {
		t.Fatalf("settled: %+v", st)
	}
	if err := s.c.clients[second].FlushAll(); err != nil {
		t.Fatal(err)
	}
	for k := range leaving {
		got := s.get(t, r, k)
		switch {
		case k == rewritten && got != "":
			t.Fatalf("%s rewritten on the leaving slot after its copy reads %q, not a miss", k, got)
		case k != rewritten && got != "v-"+k:
			t.Fatalf("%s reads %q from the slot that stays", k, got)
		}
	}
}

// TestAFollowerWhoseSlotAMoveTakesOutSaysItIsLeaving: a move the operator
// asks that takes a slot out (a scale-down, the rollout's hand-off) has
// that slot's pod say it is leaving, so that a pod deleted meanwhile sends
// it no key; the move that brings the slot back has it stop.
func TestAFollowerWhoseSlotAMoveTakesOutSaysItIsLeaving(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := start(t, "127.0.0.86", 4)
	three, four, _, _, _ := storeForAScaleUp(t, c, 100)
	planFile, log := filepath.Join(t.TempDir(), "move"), &syncBuffer{}
	var fs []*move.Follower
	for i, addr := range c.names {
		f := &move.Follower{Mover: &move.Mover{Dial: plain}, PlanFile: planFile, Host: fmt.Sprintf("cache-%d", i),
			Local: addr, Poll: 50 * time.Millisecond, Log: slog.New(slog.NewJSONHandler(log, nil))}
		fs = append(fs, f)
		go f.Run(ctx)
	}
	leaving := func() (out []bool) {
		for _, f := range fs {
			out = append(out, f.Leaving())
		}
		return out
	}
	down := move.Plan{ID: 4, Ring: ring.Libmemcached, From: string(four.Body()), To: string(three.Body())}
	publishPlan(t, planFile, &down, move.StepCopy)
	waitForFollowers(t, log, down.ID, podlog.CopiedMessage, 4)
	if got := leaving(); !slices.Equal(got, []bool{false, false, false, true}) {
		t.Fatalf("while the fourth slot is moved out, leaving: %v", got)
	}
	up := move.Plan{ID: 5, Ring: ring.Libmemcached, From: string(three.Body()), To: string(four.Body())}
	publishPlan(t, planFile, &up, move.StepCopy)
	waitForFollowers(t, log, up.ID, podlog.CopiedMessage, 4)
	if got := leaving(); slices.Contains(got, true) {
		t.Fatalf("once the fourth slot is moved back in, leaving: %v", got)
	}
}
