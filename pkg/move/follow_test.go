//go:build integration

package move_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/podlog"
	"github.com/example/memcached-operator/pkg/ring"
)

// syncBuffer is a log several followers write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// said counts the lines of msg for move id.
func (s *syncBuffer) said(t *testing.T, id int64, msg string) int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, line := range bytes.Split(s.b.Bytes(), []byte("\n")) {
		var l struct {
			Msg   string `json:"msg"`
			Move  int64  `json:"move"`
			Error string `json:"error"`
		}
		if json.Unmarshal(line, &l) != nil || l.Move != id {
			continue
		}
		if l.Msg == podlog.FailedMessage {
			t.Fatalf("a follower failed: %s", line)
		}
		if l.Msg == msg {
			n++
		}
	}
	return n
}

// TestFollowersMoveTheKeysOfAPublishedPlan: four pods' followers (each
// memcached with its own) follow a plan file as the discovery container
// follows the one the operator publishes: at the copy step each server of
// the old membership copies its keys to the owners a fifth slot's ring
// gives them, the new slot copying nothing; at the settle step each server
// of the new membership deletes what belongs elsewhere. Every key is then
// on its owner of the new ring, and only there.
func TestFollowersMoveTheKeysOfAPublishedPlan(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := start(t, "127.0.0.86", 4)
	const n = 5000
	from, to, before, after, byHost := storeForAScaleUp(t, c, n)
	planFile, log := startFollowers(ctx, t, c)
	plan := move.Plan{ID: 4, Ring: ring.Libmemcached, Step: move.StepCopy, From: string(from.Body()), To: string(to.Body())}
	publishPlan(t, planFile, &plan, move.StepCopy)
	waitForFollowers(t, log, plan.ID, podlog.CopiedMessage, 4)
	moved := 0
	for i := range n {
		k := fmt.Sprintf("key-%d", i)
		if before.Server(k) != after.Server(k) {
			moved++
			if got := c.at(t, byHost[after.Server(k)], k); got != "v-"+k {
				t.Fatalf("%s is %q on its new owner after the copy", k, got)
			}
		}
	}
	if moved < n/8 {
		t.Fatalf("only %d of %d keys move to the new slot", moved, n)
	}
	publishPlan(t, planFile, &plan, move.StepPublished)
	publishPlan(t, planFile, &plan, move.StepSettle)
	waitForFollowers(t, log, plan.ID, podlog.SettledMessage, 4)
	for i := range n {
		k := fmt.Sprintf("key-%d", i)
		for server, addr := range byHost {
			got := c.at(t, addr, k)
			switch {
			case server == after.Server(k) && got != "v-"+k:
				t.Fatalf("%s is %q on its owner %s", k, got, server)
			case server != after.Server(k) && got != "":
				t.Fatalf("%s stays on %s, which the new ring does not give it", k, server)
			}
		}
	}
	// Each step is done once: a plan seen again does nothing more.
	time.Sleep(200 * time.Millisecond)
	if got := log.said(t, plan.ID, podlog.CopiedMessage); got != 4 {
		t.Fatalf("the copy was said %d times", got)
	}
}

// storeForAScaleUp stores n keys on the first three servers of c as the
// ring of a membership of three (from, before) puts them, for a move to
// the membership of all four (to, after). byHost is each server's address
// by its ring name.
func storeForAScaleUp(t *testing.T, c *cluster, n int) (from, to discovery.Cluster, before, after *ring.Ring, byHost map[string]string) {
	nodes := make([]discovery.Node, len(c.names))
	byHost = map[string]string{}
	for i, addr := range c.names {
		ip, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		nodes[i] = discovery.Node{Host: fmt.Sprintf("cache-%d.cache.ns.svc", i), IP: ip, Port: int32(p)}
		byHost[move.Server(nodes[i])] = addr
	}
	from = discovery.Cluster{Version: 3, Nodes: nodes[:3]}
	to = discovery.Cluster{Version: 4, Nodes: nodes}
	var err error
	if before, err = ring.New(ring.Libmemcached, move.Servers(from)); err != nil {
		t.Fatal(err)
	}
	if after, err = ring.New(ring.Libmemcached, move.Servers(to)); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		k := fmt.Sprintf("key-%d", i)
		if err := c.clients[byHost[before.Server(k)]].Set(&memcache.Item{Key: k, Value: []byte("v-" + k)}); err != nil {
			t.Fatal(err)
		}
	}
	return from, to, before, after, byHost
}

// startFollowers runs a follower for each server of c until ctx ends,
// reading the plan of planFile and logging to log.
func startFollowers(ctx context.Context, t *testing.T, c *cluster) (planFile string, log *syncBuffer) {
	planFile = filepath.Join(t.TempDir(), "move")
	log = &syncBuffer{}
	for i, addr := range c.names {
		f := &move.Follower{
			Mover:    &move.Mover{Dial: plain},
			PlanFile: planFile,
			Host:     fmt.Sprintf("cache-%d", i),
			Local:    addr,
			Poll:     50 * time.Millisecond,
			Log:      slog.New(slog.NewJSONHandler(log, nil)),
		}
		go f.Run(ctx)
	}
	return planFile, log
}

// publishPlan publishes plan at step in planFile, as the kubelet writes a
// ConfigMap's key: a new file swapped in.
func publishPlan(t *testing.T, planFile string, plan *move.Plan, step string) {
	plan.Step = step
	tmp := planFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(plan.Marshal()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, planFile); err != nil {
		t.Fatal(err)
	}
}

// waitForFollowers waits until want followers said msg of move id in log.
func waitForFollowers(t *testing.T, log *syncBuffer, id int64, msg string, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for log.said(t, id, msg) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d followers said %q:\n%s", log.said(t, id, msg), want, msg, log.b.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
