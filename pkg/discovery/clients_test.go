//go:build integration

package discovery_test

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/example/memcached-operator/internal/testsupport/memcachedproc"
	"github.com/example/memcached-operator/internal/testsupport/nodeclient"
	"github.com/example/memcached-operator/pkg/discovery"
)

func node(p *memcachedproc.Process) discovery.Node {
	host, port, _ := net.SplitHostPort(p.Addr)
	var n int32
	fmt.Sscan(port, &n)
	return discovery.Node{Host: host, IP: host, Port: n}
}

// TestAClientWithAutoDiscoveryFollowsTheMembership runs the npm client
// memcached-elasticache against the endpoint: it stores and reads through
// the endpoint before any membership is published (the endpoint is a
// server, as ElastiCache's is), then finds every server the membership
// lists, spreads keys over them, and follows a change without a restart.
func TestAClientWithAutoDiscoveryFollowsTheMembership(t *testing.T) {
	servers := []*memcachedproc.Process{memcachedproc.Start(t), memcachedproc.Start(t), memcachedproc.Start(t)}
	path := filepath.Join(t.TempDir(), "cluster")
	// The endpoint runs in the first server's pod.
	addr := endpoint(t, path, servers[0].Addr, 0)
	c := nodeclient.Start(t, addr, nodeclient.Options{Interval: 300 * time.Millisecond})

	c.Next(t, "discoverFailure", 30*time.Second) // no membership yet: the endpoint says so
	if got := c.Do(t, "set 20 early"); got["errors"].(float64) != 0 {
		t.Fatalf("storing through the endpoint before discovery: %v", got)
	}
	if got := c.Do(t, "get 20 early"); got["hits"].(float64) != 20 {
		t.Fatalf("reading through the endpoint before discovery: %v", got)
	}
	if n := stat(t, servers[0].Addr, "curr_items"); n != 20 {
		t.Fatalf("the endpoint's memcached holds %d items, want the 20 stored through it", n)
	}

	publish(t, path, discovery.Cluster{Version: 1, Nodes: []discovery.Node{node(servers[0]), node(servers[1])}})
	want := []string{servers[0].Addr, servers[1].Addr}
	slices.Sort(want)
	if got := nodeclient.Nodes(c.Next(t, "discover", 30*time.Second)); !slices.Equal(got, want) {
		t.Fatalf("the client discovered %v, want %v", got, want)
	}
	if got := c.Do(t, "set 1000 first"); got["errors"].(float64) != 0 {
		t.Fatalf("set: %v", got)
	}
	if got := c.Do(t, "get 1000 first"); got["hits"].(float64) != 1000 {
		t.Fatalf("get: %v", got)
	}
	a, b := stat(t, servers[0].Addr, "curr_items")-20, stat(t, servers[1].Addr, "curr_items")
	if a+b != 1000 || a < 300 || b < 300 {
		t.Errorf("the two servers hold %d and %d of the 1000 keys: the client did not spread them over the membership", a, b)
	}

	publish(t, path, discovery.Cluster{Version: 2, Nodes: []discovery.Node{node(servers[0]), node(servers[1]), node(servers[2])}})
	want = append(want, servers[2].Addr)
	slices.Sort(want)
	if got := nodeclient.Nodes(c.Next(t, "discover", 30*time.Second)); !slices.Equal(got, want) {
		t.Fatalf("after the change the client discovered %v, want %v", got, want)
	}
	if got := c.Do(t, "set 1000 second"); got["errors"].(float64) != 0 {
		t.Fatalf("set after the change: %v", got)
	}
	if got := c.Do(t, "get 1000 second"); got["hits"].(float64) != 1000 {
		t.Fatalf("get after the change: %v", got)
	}
	if n := stat(t, servers[2].Addr, "curr_items"); n < 200 {
		t.Errorf("the added server holds %d of the 1000 new keys: the client did not follow the change", n)
	}
}
