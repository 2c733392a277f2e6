//go:build integration

package move_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/podlog"
)

// TestAHandOffCopiesAgainWhatAMoveBetweenSettled: the last slot's pod,
// deleted before it was told of the membership without a slot handed off
// just before, copies its keys from the membership it holds. The move
// before then settles on the slots that stay, which deletes those copies
// (its membership gives the keys to this slot). The membership the
// operator publishes next, without this slot, is not the one after the
// membership the pod left: the pod copies its keys again before it
// settles, and every one of them reads from the slots that stay. Without
// the second copy, every one was lost.
func TestAHandOffCopiesAgainWhatAMoveBetweenSettled(t *testing.T) {
	const n = 3000
	s := startHandOffSlots(t, n)
	log := &syncBuffer{}
	l := s.leaver(t.TempDir(), 30*time.Second, log)
	var wg sync.WaitGroup
	wg.Go(func() { l.HandOff(context.Background()) })
	if st := reported(t, log, podlog.CopiedMessage); st.Failed() {
		t.Fatalf("copied: %+v", st)
	}
	leaving := keysOf(s.before, n, move.Server(s.from.Nodes[s.last]))
	for k := range leaving {
		if err := s.c.clients[s.addr[s.aft.Server(k)]].Delete(k); err != nil {
			t.Fatalf("deleting %s's copy as a settle does: %v", k, err)
		}
	}
	s.publish(t, 0, discovery.Cluster{Version: s.from.Version + 2, Nodes: s.to.Nodes})
	wg.Wait()
	if st := reported(t, log, podlog.SettledMessage); st.Failed() {
		t.Fatalf("settled: %+v\n%s", st, log.bytes())
	}
	if lost := s.lost(t, s.aft, leaving); lost > 0 {
		t.Fatalf("%d of the leaving slot's %d keys lost", lost, len(leaving))
	}
	t.Logf("%d keys copied again, none lost", len(leaving))
}
