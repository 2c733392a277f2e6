//go:build integration

package move_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/podlog"
)

// breaks is a byte budget the connections to one peer share, copies
// going side by side: the write that would take them past it closes its
// connection and fails, as do the others' next ones, and a connection
// dialed after that is whole.
type breaks struct {
	left  atomic.Int64
	broke atomic.Bool
}

// breaksAfter is a connection that spends b.
type breaksAfter struct {
	net.Conn
	b *breaks
}

func (c *breaksAfter) Write(p []byte) (int, error) {
	if c.b.left.Add(-int64(len(p))) < 0 {
		c.b.broke.Store(true)
		c.Conn.Close()
		return 0, errors.New("the connection broke")
	}
	return c.Conn.Write(p)
}

// TestAHandOffWhoseCopyFailsIsTakenBack: the leaving slot's connections
// to one of its peers break after about two batches of copies. The
// operator would publish the membership without the slot all the same,
// and no settle would follow, so the copies made are taken back: none of
// the leaving slot's keys is left on its new owner, the slot still holds
// them all, and the failure says how many copies were taken back.
func TestAHandOffWhoseCopyFailsIsTakenBack(t *testing.T) {
	s := startHandOffSlots(t, 3000)
	log := &syncBuffer{}
	l := s.leaver(t.TempDir(), time.Minute, log)
	broken := s.addr[move.Server(s.from.Nodes[1])]
	b := &breaks{}
	// About two batches of 100 of these keys' copies.
	b.left.Store(10000)
	l.Follower.DialPeer = func(ctx context.Context, addr, _ string) (net.Conn, error) {
		c, err := plain(ctx, addr)
		if err != nil || addr != broken || b.broke.Load() {
			return c, err
		}
		return &breaksAfter{Conn: c, b: b}, nil
	}
	l.HandOff(context.Background())
	failed := reported(t, log, podlog.FailedMessage)
	t.Logf("the hand-off failed: %s", failed.Error)
	m := regexp.MustCompile(`: (\d+) copies taken back`).FindStringSubmatch(failed.Error)
	if m == nil {
		t.Fatalf("the failure does not say how many copies were taken back: %q", failed.Error)
	}
	if n, _ := strconv.Atoi(m[1]); n < 100 {
		t.Fatalf("%d copies taken back: the copy broke before it made any to take back", n)
	}
	moved := 0
	for i := range 3000 {
		k := fmt.Sprintf("key-%d", i)
		if s.before.Server(k) != move.Server(s.from.Nodes[2]) {
			continue
		}
		moved++
		if got := s.get(t, s.aft, k); got != "" {
			t.Fatalf("%s's copy stayed on %s: %q", k, s.aft.Server(k), got)
		}
		if got := s.get(t, s.before, k); got != "v-"+k {
			t.Fatalf("%s reads %q on the leaving slot", k, got)
		}
	}
	t.Logf("%d keys of the leaving slot, none left on a new owner", moved)
}
