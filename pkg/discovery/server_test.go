//go:build integration

package discovery_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	testendpoint "github.com/example/memcached-operator/internal/testsupport/endpoint"
	"github.com/example/memcached-operator/internal/testsupport/memcachedproc"
	"github.com/example/memcached-operator/pkg/discovery"
)

// These tests run memcached itself behind the endpoint: what reaches it,
// and what it answers, is memcached's.

// endpoint serves c's membership on a free port in front of memcached at
// upstream, until the test ends, and returns its address.
func endpoint(t *testing.T, membership, upstream string, timeout time.Duration) string {
	t.Helper()
	return endpointOn(t, "127.0.0.1", membership, upstream, timeout)
}

// endpointOn is endpoint, listening on a port of host.
func endpointOn(t *testing.T, host, membership, upstream string, timeout time.Duration) string {
	t.Helper()
	return testendpoint.Serve(t, host, discovery.Config{Membership: membership, Memcached: upstream, CommandTimeout: timeout})
}

// publish writes c where the endpoint reads it, swapped in whole as the
// kubelet swaps a ConfigMap's volume.
func publish(t *testing.T, path string, c discovery.Cluster) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, c.Body(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

// exchange sends req and reads lines until one is last.
func exchange(t *testing.T, conn net.Conn, r *bufio.Reader, req string, last func(string) bool) string {
	t.Helper()
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for {
		line, err := r.ReadString('\n')
		out.WriteString(line)
		if err != nil {
			t.Fatalf("after %q: %v", out.String(), err)
		}
		if last(strings.TrimRight(line, "\r\n")) {
			return out.String()
		}
	}
}

func oneLine(string) bool { return true }
func end(l string) bool   { return l == "END" || strings.HasPrefix(l, "SERVER_ERROR") || l == "ERROR" }

// stat is memcached's statistic name, read on a connection of its own.
func stat(t *testing.T, addr, name string) int {
	t.Helper()
	conn, r := dial(t, addr)
	defer conn.Close()
	out := exchange(t, conn, r, "stats\r\n", func(l string) bool { return l == "END" })
	for line := range strings.SplitSeq(out, "\r\n") {
		if v, ok := strings.CutPrefix(line, "STAT "+name+" "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("memcached has no statistic %s", name)
	return 0
}

var three = discovery.Cluster{Version: 7, Nodes: []discovery.Node{
	{Host: "cache-0.cache.ns.svc", IP: "10.0.0.5", Port: 11211},
	{Host: "cache-1.cache.ns.svc", IP: "10.0.0.6", Port: 11211},
	{Host: "cache-2.cache.ns.svc", IP: "10.0.0.7", Port: 11211},
}}

func TestTheEndpointAnswersAsElastiCache(t *testing.T) {
	m := memcachedproc.Start(t)
	path := filepath.Join(t.TempDir(), "cluster")
	addr := endpoint(t, path, m.Addr, 0)
	conn, r := dial(t, addr)

	if got := exchange(t, conn, r, "config get cluster\r\n", end); got != "SERVER_ERROR no membership is published yet\r\n" {
		t.Errorf("before any membership: %q", got)
	}
	// What the operator publishes for a new Memcached until its slots are
	// ready lists no server: a client is told to ask again, not given none.
	publish(t, path, discovery.Cluster{Version: 1})
	for _, req := range []string{"config get cluster\r\n", "get AmazonElastiCache:cluster\r\n"} {
		if got := exchange(t, conn, r, req, end); got != "SERVER_ERROR no membership is published yet\r\n" {
			t.Errorf("%q of an empty membership: %q", req, got)
		}
	}
	publish(t, path, three)
	if got, want := exchange(t, conn, r, "version\r\n", oneLine), "VERSION 1.6.18\r\n"; got != want {
		t.Errorf("version: got %q, want memcached's %q", got, want)
	}
	body := "7\ncache-0.cache.ns.svc|10.0.0.5|11211 cache-1.cache.ns.svc|10.0.0.6|11211 cache-2.cache.ns.svc|10.0.0.7|11211\n"
	want := fmt.Sprintf("CONFIG cluster 0 %d\r\n%s\r\nEND\r\n", len(body), body)
	if got := exchange(t, conn, r, "config get cluster\r\n", end); got != want {
		t.Errorf("config get cluster:\ngot  %q\nwant %q", got, want)
	}
	if got, err := discovery.Ask(conn); err != nil || !slices.Equal(got.Nodes, three.Nodes) || got.Version != three.Version {
		t.Errorf("Ask: %+v, %v; want %+v", got, err, three)
	}
	// What clients ask a server older than 1.4.14.
	wantOld := fmt.Sprintf("VALUE AmazonElastiCache:cluster 0 %d\r\n%s\r\nEND\r\n", len(body), body)
	if got := exchange(t, conn, r, "get AmazonElastiCache:cluster\r\n", end); got != wantOld {
		t.Errorf("get AmazonElastiCache:cluster:\ngot  %q\nwant %q", got, wantOld)
	}
	// A change is served on the same connection, at once.
	next := discovery.Cluster{Version: 8, Nodes: three.Nodes[:2]}
	publish(t, path, next)
	if got := exchange(t, conn, r, "config get cluster\r\n", end); !strings.Contains(got, "\r\n8\ncache-0.cache.ns.svc|10.0.0.5|11211 cache-1.cache.ns.svc|10.0.0.6|11211\n\r\nEND") {
		t.Errorf("after a change: %q", got)
	}
}

func TestAConnectionThatStartsWithDataReachesMemcached(t *testing.T) {
	m := memcachedproc.Start(t)
	path := filepath.Join(t.TempDir(), "cluster")
	publish(t, path, three)
	addr := endpoint(t, path, m.Addr, 0)

	conn, r := dial(t, addr)
	if got := exchange(t, conn, r, "set k 0 0 5\r\nhello\r\n", oneLine); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}
	// Pipelined: a discovery command answered, then the data commands
	// behind it, in order, on a second connection.
	conn2, r2 := dial(t, addr)
	got := exchange(t, conn2, r2, "version\r\nmg k v\r\nget k\r\n", func(l string) bool { return l == "END" })
	if want := "VERSION 1.6.18\r\nVA 5\r\nhello\r\nVALUE k 0 5\r\nhello\r\nEND\r\n"; got != want {
		t.Errorf("pipelined:\ngot  %q\nwant %q", got, want)
	}
	// What went through the endpoint is in memcached itself.
	direct, rd := dial(t, m.Addr)
	if got := exchange(t, direct, rd, "get k\r\n", func(l string) bool { return l == "END" }); got != "VALUE k 0 5\r\nhello\r\nEND\r\n" {
		t.Errorf("memcached holds %q", got)
	}
}

func TestBadInputGetsAnErrorAndCostsMemcachedNothing(t *testing.T) {
	// memcached's connections are counted, and memcached counts one when a
	// worker thread takes it up: with several workers, a connection made
	// earlier (Start's own, to see memcached listen) can be counted after
	// a later one, between the two readings, when the machine is busy (27
	// of 100 runs beside four busy loops). One worker takes them up in
	// the order they came. An address of its own keeps other packages'
	// tests from reaching it by a reused port.
	m := memcachedproc.StartOn(t, "127.0.0.77", "-t", "1")
	path := filepath.Join(t.TempDir(), "cluster")
	publish(t, path, three)
	addr := endpointOn(t, "127.0.0.77", path, m.Addr, 300*time.Millisecond)
	before := stat(t, m.Addr, "total_connections")

	for _, tc := range []struct {
		name, send, want string
	}{
		{"binary", "\x80\x00\x00\x05garbage", "ERROR\r\n"},
		{"unknown command", "shutdown\r\n", "ERROR\r\n"},
		{"unknown config", "config set cluster 1\r\n", "ERROR\r\n"},
		{"an endless first word", strings.Repeat("g", 10000), "ERROR\r\n"},
		{"a huge discovery line", "config get " + strings.Repeat("x", 100000) + "\r\n", "CLIENT_ERROR line too long\r\n"},
		{"slow", "config get clu", ""},
		{"nothing", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, r := dial(t, addr)
			if _, err := io.WriteString(conn, tc.send); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatalf("after %q: %v (the endpoint did not close the connection)", got, err)
			}
			if string(got) != tc.want {
				t.Errorf("got %q, want %q and a closed connection", got, tc.want)
			}
			if waited := time.Since(start); waited > 5*time.Second {
				t.Errorf("closed after %s", waited)
			}
		})
	}
	// Only the stats connection after them reached memcached.
	if after := stat(t, m.Addr, "total_connections"); after != before+1 {
		t.Errorf("memcached's total_connections went from %d to %d: bad input reached it", before, after)
	}
}

// memcached's version is asked once and then taken from memory: clients
// that ask for it at each poll cost memcached one connection a minute,
// not one each.
func TestMemcachedsVersionIsAskedOnce(t *testing.T) {
	m := memcachedproc.StartOn(t, "127.0.0.79", "-t", "1")
	path := filepath.Join(t.TempDir(), "cluster")
	publish(t, path, three)
	addr := endpointOn(t, "127.0.0.79", path, m.Addr, 300*time.Millisecond)
	before := stat(t, m.Addr, "total_connections")
	for range 3 {
		conn, r := dial(t, addr)
		if got := exchange(t, conn, r, "version\r\n", oneLine); !strings.HasPrefix(got, "VERSION 1.") {
			t.Fatalf("version: %q", got)
		}
		conn.Close()
	}
	// The version's connection, and the stats connection after it.
	if after := stat(t, m.Addr, "total_connections"); after != before+2 {
		t.Errorf("memcached's total_connections went from %d to %d: its version was asked more than once", before, after)
	}
}
