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

// TestTheLimitBoundsTheRate: with a limit of 2,000 keys a second the
// mover takes at least the time the limit allows for the keys it reads
// (a lower bound: a slow machine only takes longer), also when a batch
// holds more keys than the limit's burst.
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
	// Batches larger than the limit's burst: each waits in steps.
	m := &move.Mover{Dial: plain, Limit: rate.NewLimiter(2000, 100), Batch: 250}
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
// of 1 KiB to 20 KiB: the mover, over TLS and logged in, copies every key
// the ring of two gives the second. (memcached 1.6.18 stops reading a TLS
// connection that pipelines values: four 1 KiB sets at once wait for ever,
// seen here.)
func TestTheMoverCopiesOverTLS(t *testing.T) {
	dir := tlsFiles(t)
	var names []string
	for range 2 {
		names = append(names, memcachedproc.StartOn(t, "127.0.0.89", tlsArgs(dir)...).Addr)
	}
	dial := func(ctx context.Context, server string) (net.Conn, error) {
		return memcachedconn.Dial(ctx, memcachedconn.Options{Address: server, TLS: true, Login: "mover:secret"})
	}
	// Values of 1 KiB, of 4,000 bytes, and larger than a TLS record, in
	// every order: a batch of them cut anywhere but after a whole value
	// would stall memcached.
	copyAll(t, dial, names, 3000, func(i int) string {
		switch {
		case i%50 == 0:
			return strings.Repeat("b", 20<<10)
		case i%7 == 0:
			return strings.Repeat("m", 4000)
		}
		return strings.Repeat("v", 1024)
	}, "over TLS")
}

// tlsFiles writes a certificate, its key and an authentication file (the
// login mover:secret) into a directory memcached can read.
func tlsFiles(t testing.TB) string {
	t.Helper()
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
	return dir
}

// tlsArgs are memcached's options for TLS and authentication with the
// files of dir, as a Memcached's pods run it.
func tlsArgs(dir string) []string {
	return []string{"--auth-file=" + filepath.Join(dir, "authfile"), "--enable-ssl",
		"--extended=ssl_chain_cert=" + filepath.Join(dir, "tls.crt") + ",ssl_key=" + filepath.Join(dir, "tls.key")}
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
	// Every key copied reads on its new owner as it was stored.
	conns := map[string]net.Conn{}
	for _, s := range servers[1:] {
		if conns[s], err = dial(ctx, s); err != nil {
			t.Fatal(err)
		}
		defer conns[s].Close()
	}
	for i := range n {
		k := fmt.Sprintf("key-%d", i)
		owner := after.Server(k)
		if owner == servers[0] {
			continue
		}
		reply, err := memcachedconn.Command(conns[owner], "mg "+k+" s\r\n")
		if want := fmt.Sprintf("HD s%d", len(value(i))); err != nil || reply != want {
			t.Fatalf("%s on its new owner %s: %q %v, want %q", k, owner, reply, err, want)
		}
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
