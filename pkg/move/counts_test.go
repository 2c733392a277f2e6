//go:build integration

package move_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/podlog"
)

// copyOneHundred stores 100 keys on the second of two servers and copies
// them to the first, the ring without the second.
func copyOneHundred(t *testing.T, c *cluster) (*move.Mover, move.CopyResult) {
	t.Helper()
	for i := range 100 {
		c.set(t, c.ring(t, c.names[1:]), fmt.Sprintf("key-%d", i), "v1", 0, 0)
	}
	mover := &move.Mover{Dial: plain}
	copied, err := mover.Copy(context.Background(), c.names[1], c.ring(t, c.names[:1]))
	if err != nil || copied.Copied != 100 {
		t.Fatalf("copy: %+v %v", copied, err)
	}
	return mover, copied
}

// Keys written on their old owner between their copy and the settle are
// told apart by what they hold: one given another value is counted
// rewritten (and deleted on both sides: its copy is older than the
// write), one given the value it had counts as copied (memcached gave it a
// new CAS, nothing else) and is removed as the others are.
func TestTheSettleCountsTheKeysRewrittenSinceTheirCopy(t *testing.T) {
	c := start(t, "127.0.0.91", 2)
	mover, copied := copyOneHundred(t, c)
	before := c.ring(t, c.names[1:])
	c.set(t, before, "key-5", "v2", 0, 0)
	c.set(t, before, "key-6", "v1", 0, 0)

	res, err := mover.Settle(context.Background(), c.names[1], c.ring(t, c.names[:1]), copied.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	if want := (move.SettleResult{Removed: 99, Invalidated: 1, Rewritten: 1}); res != want {
		t.Errorf("settled %+v, want %+v", res, want)
	}
	for _, s := range c.names {
		if got := c.at(t, s, "key-5"); got != "" {
			t.Errorf("%s holds %q of the key rewritten since its copy, want none", s, got)
		}
	}
	if got := c.at(t, c.names[0], "key-6"); got != "v1" {
		t.Errorf("the key rewritten with its own value reads %q on its new owner, want its copy", got)
	}
}

// Undo counts every copy it takes back: those still at the CAS they were
// copied at, and those memcached gave a new CAS since while they hold what
// was copied.
func TestUndoCountsEveryCopyItTakesBack(t *testing.T) {
	c := start(t, "127.0.0.91", 2)
	mover, copied := copyOneHundred(t, c)
	c.set(t, c.ring(t, c.names[:1]), "key-3", "v1", 0, 0)

	n, err := mover.Undo(context.Background(), copied.Ledger)
	if err != nil || n != 100 {
		t.Errorf("took back %d copies (%v), want 100", n, err)
	}
	if got := c.at(t, c.names[0], "key-3"); got != "" {
		t.Errorf("the copy memcached gave a new CAS reads %q, want it taken back", got)
	}
}

// The second of two slots hands its keys to the first: two slots are
// enough for a hand-off.
func TestTheSecondOfTwoSlotsHandsItsKeysOff(t *testing.T) {
	s := startSlotsHandingOff(t, 2, 300)
	log := &syncBuffer{}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go s.leaver(dir, 30*time.Second, log).Run(ctx)
	for _, hook := range []string{move.MemcachedHook, move.DiscoveryHook} {
		go func() { _ = move.AwaitHandOff(ctx, dir, hook, 0) }()
	}

	copied := reported(t, log, podlog.CopiedMessage)
	leaving := 0
	for i := range 300 {
		if s.before.Server(fmt.Sprintf("key-%d", i)) == move.Server(s.from.Nodes[1]) {
			leaving++
		}
	}
	if leaving == 0 || copied.Copied != leaving {
		t.Fatalf("copied %d of the slot's %d keys", copied.Copied, leaving)
	}
}
