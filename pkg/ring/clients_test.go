//go:build integration

package ring_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/example/memcached-operator/internal/testsupport/endpoint"
	"github.com/example/memcached-operator/internal/testsupport/memcachedproc"
	"github.com/example/memcached-operator/internal/testsupport/nodeclient"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/ring"
)

// keys is how many keys each client stores.
const keys = 10000

// TestClientsPutKeysWhereTheRingDoes has two client families store 10,000
// keys on real memcacheds, each as its users run it: the Node client
// memcached-elasticache, which finds the servers through the discovery
// endpoint, and pylibmc on libmemcached with libketama's weighted ketama.
// It then reads which server holds each key and compares with the ring of
// that family: on ports of their own (servers hashed by host:port), on
// memcached's port (hashed by host), and at 7 and 25 servers, where the
// two families' rings differ (the test tells them apart).
func TestClientsPutKeysWhereTheRingDoes(t *testing.T) {
	python := "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import pylibmc").CombinedOutput(); err != nil {
		t.Fatalf("pylibmc is not installed (make node-packages): %v: %s", err, out)
	}
	for _, tc := range []struct {
		name  string
		start func(t *testing.T, i int) *memcachedproc.Process
		n     int
	}{
		{"3 servers on ports of their own", func(t *testing.T, _ int) *memcachedproc.Process {
			return memcachedproc.StartOn(t, "127.0.0.90")
		}, 3},
		{"4 servers on memcached's port", onDefaultPort, 4},
		{"7 servers on memcached's port", onDefaultPort, 7},
		{"25 servers on memcached's port", onDefaultPort, 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var servers []string
			var procs []*memcachedproc.Process
			for i := range tc.n {
				p := tc.start(t, i)
				procs = append(procs, p)
				servers = append(servers, p.Addr)
			}

			t.Run("memcached-elasticache", func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "cluster")
				c := discovery.Cluster{Version: 1}
				for _, s := range servers {
					host, port, _ := net.SplitHostPort(s)
					n, _ := strconv.Atoi(port)
					c.Nodes = append(c.Nodes, discovery.Node{Host: host, IP: host, Port: int32(n)})
				}
				if err := os.WriteFile(path, c.Body(), 0o644); err != nil {
					t.Fatal(err)
				}
				client := nodeclient.Start(t, endpoint.Serve(t, "127.0.0.1", discovery.Config{Membership: path, Memcached: servers[0]}), nodeclient.Options{Interval: time.Second})
				client.Discovered(t, slices.Sorted(slices.Values(servers)), 30*time.Second)
				if got := client.Do(t, fmt.Sprintf("set %d node", keys)); nodeclient.Count(got, "errors") != 0 {
					t.Fatalf("set: %v", got)
				}
				compare(t, ring.Node, servers, placement(t, procs, "node"))
			})

			t.Run("pylibmc", func(t *testing.T) {
				out, err := exec.Command(python, repo.Path("hack", "clients", "libmemcached.py"), strings.Join(servers, ","), strconv.Itoa(keys), "pylibmc").Output()
				if err != nil {
					t.Fatalf("pylibmc: %v: %s", err, out)
				}
				var got struct{ Errors int }
				if err := json.Unmarshal(out, &got); err != nil || got.Errors != 0 {
					t.Fatalf("pylibmc stored with %s (%v)", out, err)
				}
				compare(t, ring.Libmemcached, servers, placement(t, procs, "pylibmc"))
			})
		})
	}
}

// onDefaultPort starts the ith memcached on port 11211 of an address of
// the loopback of its own.
func onDefaultPort(t *testing.T, i int) *memcachedproc.Process {
	return memcachedproc.StartAt(t, fmt.Sprintf("127.0.0.%d", 91+i), 11211)
}

// compare fails t unless hash's ring of servers puts every key where the
// client did, and says how many keys the other family's ring would have
// put elsewhere.
func compare(t *testing.T, hash ring.Hash, servers []string, held map[string]string) {
	t.Helper()
	if len(held) != keys {
		t.Fatalf("the servers hold %d of the %d keys", len(held), keys)
	}
	r, err := ring.New(hash, servers)
	if err != nil {
		t.Fatal(err)
	}
	other := ring.Node
	if hash == ring.Node {
		other = ring.Libmemcached
	}
	o, err := ring.New(other, servers)
	if err != nil {
		t.Fatal(err)
	}
	var wrong, otherWrong []string
	for key, server := range held {
		if got := r.Server(key); got != server {
			wrong = append(wrong, fmt.Sprintf("%s on %s, the ring says %s", key, server, got))
		}
		if o.Server(key) != server {
			otherWrong = append(otherWrong, key)
		}
	}
	if len(wrong) > 0 {
		slices.Sort(wrong)
		t.Errorf("%d of %d keys are not where the %s ring puts them, e.g. %v", len(wrong), keys, hash, wrong[:min(3, len(wrong))])
	}
	t.Logf("the %s ring puts all %d keys where the client did; the %s ring would put %d elsewhere", hash, keys, other, len(otherWrong))
	// Where the two families' rounding differs (Node's at 7 servers,
	// libmemcached's at 25), this test tells them apart.
	if (len(servers) == 7 || len(servers) == 25) && len(otherWrong) == 0 {
		t.Errorf("at %d servers the %s ring should differ from the %s client's placement", len(servers), other, hash)
	}
}

// placement reads from each memcached which of the keys prefix-0..n-1 it
// holds, with the value the client stored: key -> server.
func placement(t *testing.T, procs []*memcachedproc.Process, prefix string) map[string]string {
	t.Helper()
	held := map[string]string{}
	for _, p := range procs {
		c := memcache.New(p.Addr)
		c.Timeout = 5 * time.Second
		for from := 0; from < keys; from += 100 {
			var batch []string
			for i := from; i < min(keys, from+100); i++ {
				batch = append(batch, fmt.Sprintf("%s-%d", prefix, i))
			}
			items, err := c.GetMulti(batch)
			if err != nil {
				t.Fatalf("%s: %v", p.Addr, err)
			}
			for key, item := range items {
				if string(item.Value) != "v-"+key {
					t.Fatalf("%s holds %q for %s", p.Addr, item.Value, key)
				}
				if other, dup := held[key]; dup {
					t.Fatalf("%s is on %s and %s", key, other, p.Addr)
				}
				held[key] = p.Addr
			}
		}
		c.Close()
	}
	return held
}
