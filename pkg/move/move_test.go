//go:build integration

package move_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/example/memcached-operator/internal/testsupport/memcachedproc"
	"github.com/example/memcached-operator/pkg/memcachedconn"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/ring"
)

// cluster is memcacheds on ports of their own of host, named by their
// addresses, each with a client of its own.
type cluster struct {
	names   []string
	clients map[string]*memcache.Client
}

func start(t testing.TB, host string, n int, args ...string) *cluster {
	t.Helper()
	c := &cluster{clients: map[string]*memcache.Client{}}
	for range n {
		c.add(t, host, args...)
	}
	return c
}

func (c *cluster) add(t testing.TB, host string, args ...string) string {
	t.Helper()
	p := memcachedproc.StartOn(t, host, args...)
	c.names = append(c.names, p.Addr)
	mc := memcache.New(p.Addr)
	mc.Timeout = 5 * time.Second
	c.clients[p.Addr] = mc
	return p.Addr
}

func (c *cluster) ring(t testing.TB, names []string) *ring.Ring {
	t.Helper()
	r, err := ring.New(ring.Libmemcached, names)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// set stores key through r, as a client of that membership does.
func (c *cluster) set(t testing.TB, r *ring.Ring, key, value string, flags uint32, ttl int32) {
	t.Helper()
	if err := c.clients[r.Server(key)].Set(&memcache.Item{Key: key, Value: []byte(value), Flags: flags, Expiration: ttl}); err != nil {
		t.Fatal(err)
	}
}

// get reads key through r: its value, or "" on a miss.
func (c *cluster) get(t testing.TB, r *ring.Ring, key string) string {
	t.Helper()
	return c.at(t, r.Server(key), key)
}

// at reads key from one server: its value, or "" on a miss.
func (c *cluster) at(t testing.TB, server, key string) string {
	t.Helper()
	it, err := c.clients[server].Get(key)
	if err == memcache.ErrCacheMiss {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(it.Value)
}

func plain(ctx context.Context, server string) (net.Conn, error) {
	return memcachedconn.Dial(ctx, memcachedconn.Options{Address: server})
}

// TestAScaleUpMovesItsKeysAndLeavesNoOldValue: three memcacheds hold
// 20,000 keys a client of three stored; a fourth is added. Copy puts each
// key the ring of four gives the fourth on it, with its value, flags and
// time to live; Settle then leaves no key anywhere but on its owner. A
// value a client of the new membership wrote on the new owner before the
// copy is kept; a key written on its old owner after the copy (by a client
// still on the old membership) is a miss after Settle, never the older
// copy; one then written on the new owner too keeps that newest value.
func TestAScaleUpMovesItsKeysAndLeavesNoOldValue(t *testing.T) {
	c := start(t, "127.0.0.85", 3)
	before := c.ring(t, c.names)
	const n = 20000
	for i := range n {
		ttl := int32(0)
		if i%2 == 1 {
			ttl = 3600
		}
		c.set(t, before, fmt.Sprintf("key-%d", i), fmt.Sprintf("v1-%d", i), uint32(i), ttl)
	}
	added := c.add(t, "127.0.0.85")
	after := c.ring(t, c.names)

	// The keys whose owner changes, and three of them for the writes
	// around the move.
	var moving []string
	for i := range n {
		if k := fmt.Sprintf("key-%d", i); before.Server(k) != after.Server(k) {
			moving = append(moving, k)
		}
	}
	if len(moving) < n/6 || len(moving) > n/3 {
		t.Fatalf("%d of %d keys move to the fourth server", len(moving), n)
	}
	newer, rewrittenOld, rewrittenBoth := moving[0], moving[1], moving[2]
	// A client already on the new membership wrote one before the copy.
	c.set(t, after, newer, "newer", 0, 0)

	mover := &move.Mover{Dial: plain}
	ledgers := copyAndCheck(t, c, mover, after, moving, newer, added)
	// The membership is published; clients take it at different moments.
	// One still on the old membership writes two of the moved keys on
	// their old owner; a client on the new one writes one of them.
	c.set(t, before, rewrittenOld, "v2-old-owner", 0, 0)
	c.set(t, before, rewrittenBoth, "v2-old-owner", 0, 0)
	c.set(t, after, rewrittenBoth, "v3-new-owner", 0, 0)

	settleAndCheck(t, c, mover, after, ledgers)
	if got := c.get(t, after, rewrittenOld); got != "" {
		t.Errorf("a key written on its old owner after the copy reads %q on the new owner: an older value, where a miss was due", got)
	}
	if got := c.get(t, after, rewrittenBoth); got != "v3-new-owner" {
		t.Errorf("a key written on the new owner last reads %q", got)
	}
	expectOnlyTheNewRingsKeys(t, c, after, n, newer, rewrittenOld, rewrittenBoth)
}

// copyAndCheck copies the keys of the first three servers of c that after
// puts elsewhere, and checks that every moving key but newer (which its
// new owner held already, added) is on its new owner as it was. It
// returns the copies' ledgers.
func copyAndCheck(t *testing.T, c *cluster, mover *move.Mover, after *ring.Ring, moving []string, newer, added string) []move.Ledger {
	ctx := context.Background()
	var ledgers []move.Ledger
	copied, present, gone := 0, 0, 0
	for _, s := range c.names[:3] {
		res, err := mover.Copy(ctx, s, after)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("copy from %s: %+v", s, struct{ Listed, Leaving, Copied, Present, Gone int }{res.Listed, res.Leaving, res.Copied, res.Present, res.Gone})
		copied, present, gone = copied+res.Copied, present+res.Present, gone+res.Gone
		ledgers = append(ledgers, res.Ledger)
	}
	if copied != len(moving)-1 || present != 1 || gone != 0 {
		t.Errorf("copied %d keys, %d present, %d gone; want the %d that move but the one the new owner held, which is present, and none gone", copied, present, gone, len(moving)-1)
	}
	if got := c.at(t, added, newer); got != "newer" {
		t.Errorf("the copy replaced a value the new owner held: %q", got)
	}
	// Every moving key is on its new owner as it was on the old one.
	for _, k := range moving[1:] {
		it, err := c.clients[added].Get(k)
		if err != nil {
			t.Fatalf("%s on the new owner: %v", k, err)
		}
		var i int
		fmt.Sscanf(k, "key-%d", &i)
		if string(it.Value) != fmt.Sprintf("v1-%d", i) || it.Flags != uint32(i) {
			t.Fatalf("%s on the new owner: %q, flags %d", k, it.Value, it.Flags)
		}
	}

	return ledgers
}

// expectOnlyTheNewRingsKeys: no server of c holds a key of the n the new
// ring (after) puts elsewhere, so no later change of the slots can bring
// an old value back; and every key but the three rewritten reads as it
// was stored.
func expectOnlyTheNewRingsKeys(t *testing.T, c *cluster, after *ring.Ring, n int, newer, rewrittenOld, rewrittenBoth string) {
	for _, s := range c.names {
		for i := range n {
			k := fmt.Sprintf("key-%d", i)
			if after.Server(k) != s && c.at(t, s, k) != "" {
				t.Fatalf("%s still holds %s, which the new ring puts on %s", s, k, after.Server(k))
			}
		}
	}
	for i := range n {
		k := fmt.Sprintf("key-%d", i)
		if k == newer || k == rewrittenOld || k == rewrittenBoth {
			continue
		}
		if got := c.get(t, after, k); got != fmt.Sprintf("v1-%d", i) {
			t.Fatalf("%s reads %q after the move", k, got)
		}
	}
}

// TestAScaleDownCopiesTheLeavingSlotsKeys: the last of four memcacheds
// leaves; its keys are copied to the owners the ring of three gives them,
// with their times to live, before it goes.
func TestAScaleDownCopiesTheLeavingSlotsKeys(t *testing.T) {
	ctx := context.Background()
	c := start(t, "127.0.0.86", 4)
	before := c.ring(t, c.names)
	const n = 8000
	for i := range n {
		c.set(t, before, fmt.Sprintf("key-%d", i), fmt.Sprintf("v-%d", i), 0, 600)
	}
	leaving := c.names[3]
	after := c.ring(t, c.names[:3])
	res, err := (&move.Mover{Dial: plain}).Copy(ctx, leaving, after)
	if err != nil {
		t.Fatal(err)
	}
	if res.Listed != res.Leaving || res.Copied != res.Leaving || res.Listed < n/6 {
		t.Errorf("from the leaving slot: %+v", res)
	}
	delete(c.clients, leaving)
	for i := range n {
		k := fmt.Sprintf("key-%d", i)
		if got := c.get(t, after, k); got != fmt.Sprintf("v-%d", i) {
			t.Fatalf("%s reads %q after the scale-down", k, got)
		}
	}
	// Times to live came along: a key expiring in 600 s still does.
	conn, err := plain(ctx, after.Server("key-0"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reply, err := memcachedconn.Command(conn, "mg key-0 t\r\n")
	if err != nil {
		t.Fatal(err)
	}
	var ttl int
	if _, err := fmt.Sscanf(reply, "HD t%d", &ttl); err != nil || ttl <= 0 || ttl > 600 {
		t.Errorf("key-0's time to live after the move: %q", reply)
	}
}

// settleAndCheck settles the first three servers of c after their copies
// (ledgers): the two keys written on their old owner after the copy are
// invalidated, the one the new owner held was never copied, every other
// copy is removed from its old owner.
func settleAndCheck(t *testing.T, c *cluster, mover *move.Mover, after *ring.Ring, ledgers []move.Ledger) {
	t.Helper()
	var settled move.SettleResult
	copied := 0
	for i, s := range c.names[:3] {
		res, err := mover.Settle(context.Background(), s, after, ledgers[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("settle %s: %+v", s, res)
		settled.Removed, settled.Invalidated, settled.Uncopied = settled.Removed+res.Removed, settled.Invalidated+res.Invalidated, settled.Uncopied+res.Uncopied
		copied += len(ledgers[i])
	}
	if want := (move.SettleResult{Removed: copied - 2, Invalidated: 2, Uncopied: 1}); settled != want {
		t.Errorf("settled %+v, want %+v", settled, want)
	}
}
