//go:build integration

package move_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/podlog"
	"github.com/example/memcached-operator/pkg/ring"
)

// handOffSlots are three memcacheds, each with a discovery endpoint on the
// same port of its own address (as pods have), serving the membership of
// their file; the last slot is the one leaving.
type handOffSlots struct {
	c           *cluster
	from, to    discovery.Cluster
	before, aft *ring.Ring
	files       []string
	port        int
	// addr is each server's address, by its name on the rings.
	addr map[string]string
	// last is the index of the last slot, the one that leaves.
	last int
	// followers are the slots' pods' followers, whose Leaving the
	// endpoints answer.
	followers []*move.Follower
}

func (s *handOffSlots) set(t *testing.T, r *ring.Ring, key, value string) {
	t.Helper()
	if err := s.c.clients[s.addr[r.Server(key)]].Set(&memcache.Item{Key: key, Value: []byte(value)}); err != nil {
		t.Fatal(err)
	}
}

func (s *handOffSlots) get(t *testing.T, r *ring.Ring, key string) string {
	t.Helper()
	return s.c.at(t, s.addr[r.Server(key)], key)
}

// startHandOffSlots starts three slots holding keys, the last of which
// leaves (startSlotsHandingOff).
func startHandOffSlots(t *testing.T, keys int) *handOffSlots {
	return startSlotsHandingOff(t, 3, keys)
}

// startSlotsHandingOff starts n slots (at most three) holding keys, and
// their discovery endpoints serving a membership of all n; the last one
// leaves.
func startSlotsHandingOff(t *testing.T, n, keys int) *handOffSlots {
	s := &handOffSlots{c: &cluster{clients: map[string]*memcache.Client{}}, addr: map[string]string{}, last: n - 1}
	hosts := []string{"127.0.0.101", "127.0.0.102", "127.0.0.103"}[:n]
	var nodes []discovery.Node
	for i, h := range hosts {
		addr := s.c.add(t, h)
		_, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		nodes = append(nodes, discovery.Node{Host: fmt.Sprintf("cache-%d.cache.ns.svc", i), IP: h, Port: int32(p)})
		s.followers = append(s.followers, &move.Follower{Mover: &move.Mover{Dial: plain}, Host: fmt.Sprintf("cache-%d", i), Local: addr})
		s.addr[move.Server(nodes[i])] = addr
	}
	s.from = discovery.Cluster{Version: 7, Nodes: nodes}
	s.to = discovery.Cluster{Version: 8, Nodes: nodes[:s.last]}
	s.before = s.c.ring(t, move.Servers(s.from))
	s.aft = s.c.ring(t, move.Servers(s.to))
	lns := listenOnOnePort(t, hosts)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for i, ln := range lns {
		file := filepath.Join(t.TempDir(), "cluster")
		s.files = append(s.files, file)
		s.publish(t, i, s.from)
		srv := discovery.New(discovery.Config{Membership: file, Memcached: s.c.names[i], Leaving: s.followers[i].Leaving, Log: slog.New(slog.DiscardHandler)})
		go srv.Serve(ctx, ln)
	}
	s.port = lns[0].Addr().(*net.TCPAddr).Port
	for i := range keys {
		k := fmt.Sprintf("key-%d", i)
		s.set(t, s.before, k, "v-"+k)
	}
	return s
}

// listenOnOnePort listens on the same port of each host.
func listenOnOnePort(t *testing.T, hosts []string) []net.Listener {
	for range 20 {
		first, err := net.Listen("tcp", net.JoinHostPort(hosts[0], "0"))
		if err != nil {
			t.Fatal(err)
		}
		port := strconv.Itoa(first.Addr().(*net.TCPAddr).Port)
		lns := []net.Listener{first}
		for _, h := range hosts[1:] {
			ln, err := net.Listen("tcp", net.JoinHostPort(h, port))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		if len(lns) == len(hosts) {
			for _, ln := range lns {
				t.Cleanup(func() { ln.Close() })
			}
			return lns
		}
		for _, ln := range lns {
			ln.Close()
		}
	}
	t.Fatal("no port free on every host")
	return nil
}

// publish has slot i serve c, as the kubelet writes the ConfigMap's key.
func (s *handOffSlots) publish(t *testing.T, i int, c discovery.Cluster) {
	tmp := s.files[i] + ".tmp"
	if err := os.WriteFile(tmp, c.Body(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.files[i]); err != nil {
		t.Fatal(err)
	}
}

// TestALeavingSlotHandsItsKeysOff: the last of three slots is deleted
// (its preStop hook writes the leaving file). It copies its keys to the
// slots the membership without it gives them; once a peer's endpoint
// serves that membership and the clients' poll passed, it settles, and
// the hook's wait ends. Every one of its keys reads through the new ring
// with its value, but one a client rewrote on it after its copy: a miss,
// never the older copy.
func TestALeavingSlotHandsItsKeysOff(t *testing.T) {
	s := startHandOffSlots(t, 3000)
	log := &syncBuffer{}
	dir := t.TempDir()
	go s.leaver(dir, 30*time.Second, log).Run(context.Background())
	// The pod is deleted: the kubelet runs both containers' hooks.
	hook := make(chan error, 2)
	go func() { hook <- move.AwaitHandOff(context.Background(), dir, move.MemcachedHook, 0) }()
	go func() { hook <- move.AwaitHandOff(context.Background(), dir, move.DiscoveryHook, 0) }()

	copied := reported(t, log, podlog.CopiedMessage)
	var leaving []string
	for i := range 3000 {
		if k := fmt.Sprintf("key-%d", i); s.before.Server(k) == move.Server(s.from.Nodes[2]) {
			leaving = append(leaving, k)
		}
	}
	if copied.Copied != len(leaving) {
		t.Fatalf("copied %d of the slot's %d keys", copied.Copied, len(leaving))
	}
	// The report names the membership left by its members, which the
	// operator matches when its published version is newer (a mounted
	// membership lagging) but its members the same.
	if copied.Members != move.MembersDigest(s.from) {
		t.Fatalf("the report names the members %q, not the membership left's %q", copied.Members, move.MembersDigest(s.from))
	}
	// A client still on the old membership rewrites a key after its copy.
	rewritten := leaving[0]
	s.set(t, s.before, rewritten, "newer")
	select {
	case err := <-hook:
		t.Fatalf("the hook's wait ended (%v) before the membership without the slot was served", err)
	case <-time.After(time.Second):
	}
	s.publish(t, 0, s.to)
	for range 2 {
		if err := <-hook; err != nil {
			t.Fatal(err)
		}
	}
	settled := reported(t, log, podlog.SettledMessage)
	if settled.Failed() || settled.Invalidated != 1 {
		t.Fatalf("settled: %+v", settled)
	}
	for _, k := range leaving {
		got := s.get(t, s.aft, k)
		switch {
		case k == rewritten && got != "":
			t.Fatalf("%s rewritten on the leaving slot after its copy reads %q, not a miss", k, got)
		case k != rewritten && got != "v-"+k:
			t.Fatalf("%s reads %q through the membership without the slot", k, got)
		}
	}
}

// TestAHandOffNobodyPublishesIsTakenBack: the operator never publishes the
// membership without the leaving slot. Its copies are deleted again, but
// one a client changed since on its new owner: the clients, still on the
// membership with the slot, would never read them, and a later move could
// bring them back over newer writes.
func TestAHandOffNobodyPublishesIsTakenBack(t *testing.T) {
	s := startHandOffSlots(t, 1000)
	log := &syncBuffer{}
	l := s.leaver(t.TempDir(), time.Second, log)
	done := make(chan struct{})
	go func() { l.HandOff(context.Background()); close(done) }()
	copied := reported(t, log, podlog.CopiedMessage)
	var moved []string
	for i := range 1000 {
		if k := fmt.Sprintf("key-%d", i); s.before.Server(k) == move.Server(s.from.Nodes[2]) {
			moved = append(moved, k)
		}
	}
	kept := moved[0]
	s.set(t, s.aft, kept, "the client's")
	<-done
	failed := reported(t, log, podlog.FailedMessage)
	t.Logf("copied %d; %s", copied.Copied, failed.Error)
	for _, k := range moved {
		got := s.get(t, s.aft, k)
		switch {
		case k == kept && got != "the client's":
			t.Fatalf("%s, set by a client on its new owner, reads %q", k, got)
		case k != kept && got != "":
			t.Fatalf("%s's copy stayed on %s: %q", k, s.aft.Server(k), got)
		}
	}
}

func (s *syncBuffer) bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// TestAContainerRestartedAloneHandsNothingOff: the kubelet runs one
// container's preStop hook alone when it restarts that container in its
// pod (memcached's, for a new image set in place): the hook returns after
// its own wait, and nothing is handed off.
func TestAContainerRestartedAloneHandsNothingOff(t *testing.T) {
	s := startHandOffSlots(t, 300)
	log := &syncBuffer{}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.leaver(dir, 30*time.Second, log).Run(ctx)
	start := time.Now()
	if err := move.AwaitHandOff(context.Background(), dir, move.MemcachedHook, 4*time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 4*time.Second || took > 8*time.Second {
		t.Fatalf("the hook took %s: want its own 4 s", took)
	}
	time.Sleep(300 * time.Millisecond)
	if b := log.bytes(); len(b) > 0 {
		t.Fatalf("a hand-off ran: %s", b)
	}
	// Later, the pod is deleted: both hooks, and a hand-off.
	done := make(chan error, 1)
	go func() { done <- move.AwaitHandOff(context.Background(), dir, move.DiscoveryHook, 0) }()
	go move.AwaitHandOff(context.Background(), dir, move.MemcachedHook, 0)
	reported(t, log, podlog.CopiedMessage)
}
