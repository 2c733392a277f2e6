//go:build integration

package move_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"golang.org/x/time/rate"

	"github.com/example/memcached-operator/internal/testsupport/memcachedproc"
	"github.com/example/memcached-operator/internal/testsupport/testcerts"
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
	ctx := context.Background()
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
	var ledgers []move.Ledger
	copied := 0
	for _, s := range c.names[:3] {
		res, err := mover.Copy(ctx, s, after)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("copy from %s: %+v", s, struct{ Listed, Leaving, Copied, Present, Gone int }{res.Listed, res.Leaving, res.Copied, res.Present, res.Gone})
		copied += res.Copied
		ledgers = append(ledgers, res.Ledger)
	}
	if copied != len(moving)-1 {
		t.Errorf("copied %d keys, want the %d that move but the one the new owner held", copied, len(moving)-1)
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

	// The membership is published; clients take it at different moments.
	// One still on the old membership writes two of the moved keys on
	// their old owner; a client on the new one writes one of them.
	c.set(t, before, rewrittenOld, "v2-old-owner", 0, 0)
	c.set(t, before, rewrittenBoth, "v2-old-owner", 0, 0)
	c.set(t, after, rewrittenBoth, "v3-new-owner", 0, 0)

	for i, s := range c.names[:3] {
		res, err := mover.Settle(ctx, s, after, ledgers[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("settle %s: %+v", s, res)
	}
	if got := c.get(t, after, rewrittenOld); got != "" {
		t.Errorf("a key written on its old owner after the copy reads %q on the new owner: an older value, where a miss was due", got)
	}
	if got := c.get(t, after, rewrittenBoth); got != "v3-new-owner" {
		t.Errorf("a key written on the new owner last reads %q", got)
	}
	// No server holds a key the new ring puts elsewhere: no later change
	// of the slots can bring an old value back.
	for _, s := range c.names {
		for i := range n {
			k := fmt.Sprintf("key-%d", i)
			if after.Server(k) != s && c.at(t, s, k) != "" {
				t.Fatalf("%s still holds %s, which the new ring puts on %s", s, k, after.Server(k))
			}
		}
	}
	// Every other key reads as it was stored.
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

// TestTheMoverLogsInAsClientsDo: with memcached's authentication the
// mover lists, reads and writes once logged in.
func TestTheMoverLogsInAsClientsDo(t *testing.T) {
	ctx := context.Background()
	dir := memcachedproc.FilesDir(t)
	auth := filepath.Join(dir, "auth")
	if err := os.WriteFile(auth, []byte("mover:secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var names []string
	for range 2 {
		names = append(names, memcachedproc.StartOn(t, "127.0.0.87", "-Y", auth).Addr)
	}
	dial := func(ctx context.Context, server string) (net.Conn, error) {
		return memcachedconn.Dial(ctx, memcachedconn.Options{Address: server, Login: "mover:secret"})
	}
	after := copyAll(t, dial, names, 200, func(i int) string { return fmt.Sprintf("v-%d", i) }, "with a login")
	// Without the login memcached refuses the listing.
	_, err := (&move.Mover{Dial: plain}).Copy(ctx, names[0], after)
	if err == nil || !strings.Contains(err.Error(), "listing") {
		t.Errorf("without a login: %v", err)
	}
}

// BenchmarkCopy100000Keys: a memcached's 100,000 keys (100-byte values)
// copied to another, unbounded (go test -tags integration -bench Copy
// -benchtime 3x ./pkg/move).
func BenchmarkCopy100000Keys(b *testing.B) {
	ctx := context.Background()
	c := start(b, "127.0.0.88", 2)
	from, to := c.names[0], c.names[1]
	value := strings.Repeat("x", 100)
	conn, err := plain(ctx, from)
	if err != nil {
		b.Fatal(err)
	}
	var req strings.Builder
	for i := range 100000 {
		fmt.Fprintf(&req, "ms key-%d %d q\r\n%s\r\n", i, len(value), value)
	}
	req.WriteString("mn\r\n")
	if reply, err := memcachedconn.Command(conn, req.String()); err != nil || reply != "MN" {
		b.Fatalf("filling: %q %v", reply, err)
	}
	conn.Close()
	after, err := ring.New(ring.Libmemcached, []string{to})
	if err != nil {
		b.Fatal(err)
	}
	mover := &move.Mover{Dial: plain}
	for b.Loop() {
		b.StopTimer()
		if err := c.clients[to].FlushAll(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := mover.Copy(ctx, from, after)
		if err != nil || res.Copied != 100000 {
			b.Fatalf("%+v %v", res.Copied, err)
		}
	}
}

// TestTheLimitBoundsTheRate: with a limit of 2,000 keys a second the
// mover takes at least the time the limit allows for the keys it reads
// (a lower bound: a slow machine only takes longer).
func TestTheLimitBoundsTheRate(t *testing.T) {
	ctx := context.Background()
	c := start(t, "127.0.0.88", 2)
	for i := range 3000 {
		if err := c.clients[c.names[0]].Set(&memcache.Item{Key: fmt.Sprintf("key-%d", i), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	after, err := ring.New(ring.Libmemcached, c.names[1:])
	if err != nil {
		t.Fatal(err)
	}
	m := &move.Mover{Dial: plain, Limit: rate.NewLimiter(2000, 100)}
	start := time.Now()
	res, err := m.Copy(ctx, c.names[0], after)
	if err != nil || res.Copied != 3000 {
		t.Fatalf("%+v %v", res, err)
	}
	// 3,000 keys at 2,000 a second, the first 100 at once: 1.45 s.
	if took := time.Since(start); took < 1400*time.Millisecond {
		t.Errorf("3,000 keys copied in %s, under the 1.45 s a limit of 2,000 a second allows", took)
	}
}

// TestTheMoverCopiesOverTLS: two memcacheds with TLS and an
// authentication file, as a Memcached's pods run them, holding 3,000 keys
// of 1 KiB: the mover, over TLS and logged in, copies every key the ring
// of two gives the second. (memcached 1.6.18 stops reading a TLS
// connection that pipelines values: four 1 KiB sets at once wait for ever,
// seen here.)
func TestTheMoverCopiesOverTLS(t *testing.T) {
	dir := memcachedproc.FilesDir(t)
	ca, err := testcerts.NewCA("move")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue("server", []string{"cache.ns.svc"}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tls.crt": pair.Cert, "tls.key": pair.Key, "authfile": []byte("mover:secret\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for range 2 {
		names = append(names, memcachedproc.StartOn(t, "127.0.0.89", "--auth-file="+filepath.Join(dir, "authfile"), "--enable-ssl",
			"--extended=ssl_chain_cert="+filepath.Join(dir, "tls.crt")+",ssl_key="+filepath.Join(dir, "tls.key")).Addr)
	}
	dial := func(ctx context.Context, server string) (net.Conn, error) {
		return memcachedconn.Dial(ctx, memcachedconn.Options{Address: server, TLS: true, Login: "mover:secret"})
	}
	value := strings.Repeat("v", 1024)
	copyAll(t, dial, names, 3000, func(int) string { return value }, "over TLS")
}

// copyAll stores n keys (key-i, value(i)) on the first of servers through
// dial, copies them with dial to the owners the ring of servers gives
// them, checks that every leaving key was copied, and returns that ring.
func copyAll(t *testing.T, dial move.Dialer, servers []string, n int, value func(int) string, how string) *ring.Ring {
	t.Helper()
	ctx := context.Background()
	conn, err := dial(ctx, servers[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		v := value(i)
		if reply, err := memcachedconn.Command(conn, fmt.Sprintf("set key-%d 0 0 %d\r\n%s\r\n", i, len(v), v)); err != nil || reply != "STORED" {
			t.Fatalf("set: %q %v", reply, err)
		}
	}
	conn.Close()
	after, err := ring.New(ring.Libmemcached, servers)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&move.Mover{Dial: dial}).Copy(ctx, servers[0], after)
	if err != nil {
		t.Fatal(err)
	}
	if res.Listed != n || res.Copied == 0 || res.Copied != res.Leaving {
		t.Errorf("copied %s: %+v", how, res)
	}
	return after
}

// TestAKeyOfAnyBytesMovesAsOneKey: memcached's binary protocol (and the
// meta protocol's base64 keys) store keys with spaces and line ends, which
// its metadump lists escaped. Such a key moves as one key: written into a
// command line as it reads, it would be commands of its own (here a
// flush_all of the server it is read from), not a key.
func TestAKeyOfAnyBytesMovesAsOneKey(t *testing.T) {
	ctx := context.Background()
	c := start(t, "127.0.0.86", 2)
	leaving := c.names[1]
	after := c.ring(t, c.names[:1])
	const n = 100
	for i := range n {
		if err := c.clients[leaving].Set(&memcache.Item{Key: fmt.Sprintf("key-%d", i), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	evil := "x v\r\nflush_all\r\nmn"
	conn, err := plain(ctx, leaving)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if reply, err := memcachedconn.Command(conn, "ms "+base64.StdEncoding.EncodeToString([]byte(evil))+" 4 b T0\r\nevil\r\n"); err != nil || reply != "HD" {
		t.Fatalf("storing the key: %q, %v", reply, err)
	}
	res, err := (&move.Mover{Dial: plain}).Copy(ctx, leaving, after)
	if err != nil {
		t.Fatal(err)
	}
	if res.Copied != n+1 {
		t.Errorf("copied %+v, want all %d keys", res, n+1)
	}
	for i := range n {
		k := fmt.Sprintf("key-%d", i)
		if got := c.at(t, leaving, k); got != "v" {
			t.Fatalf("%s reads %q on the leaving server after the copy", k, got)
		}
	}
	to, err := plain(ctx, c.names[0])
	if err != nil {
		t.Fatal(err)
	}
	defer to.Close()
	if reply, err := memcachedconn.Command(to, "mg "+base64.StdEncoding.EncodeToString([]byte(evil))+" b s\r\n"); err != nil || reply != "HD s4" {
		t.Errorf("the key on its new server: %q, %v", reply, err)
	}
}
