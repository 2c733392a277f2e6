//go:build integration

package move_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/podlog"
	"github.com/example/memcached-operator/pkg/ring"
)

// TestASettleKeepsTheKeysALeavingPeerHandedOn: the move handing the last
// slot off reaches its settle just as the second slot's pod, deleted
// before it was told of that move, has handed its keys onto the first
// slot, the membership without both (which the operator publishes next).
// The first slot's follower settles the move: the second slot says it is
// leaving, so the keys the move's membership gives the second slot stay on
// the first, where the next move needs them. Without asking, the settle
// deleted every one of them.
func TestASettleKeepsTheKeysALeavingPeerHandedOn(t *testing.T) {
	const n = 3000
	s := startHandOffSlots(t, n)
	first, second := move.Server(s.from.Nodes[0]), move.Server(s.from.Nodes[1])
	handed := keysOf(s.aft, n, second)
	onFirst := s.c.ring(t, []string{first})
	for k := range handed {
		s.set(t, onFirst, k, "v-"+k)
	}
	move.SetLeaving(s.followers[1])
	log := &syncBuffer{}
	f := s.followers[0]
	f.Log, f.EndpointPort = slog.New(slog.NewJSONHandler(log, nil)), s.port
	f.PlanFile = filepath.Join(t.TempDir(), "move")
	p := move.Plan{ID: s.to.Version, Ring: ring.Libmemcached, Step: move.StepSettle, From: string(s.from.Body()), To: string(s.to.Body())}
	if err := os.WriteFile(f.PlanFile, []byte(p.Marshal()), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, ok := podlog.LastStep(log.bytes(), p.ID, move.StepSettle, podlog.SettledMessage)
		if ok && st.Failed() {
			t.Fatalf("settled: %+v", st)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower did not settle:\n%s", log.bytes())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if lost := s.lost(t, onFirst, handed); lost > 0 {
		t.Fatalf("%d of the %d keys the leaving slot handed on were deleted by the settle", lost, len(handed))
	}
	t.Logf("%d keys handed on, all kept", len(handed))
}
