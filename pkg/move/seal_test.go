package move_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/ring"
)

// A follower with a seal follows only the plan the seal vouches for: a
// plan merged into the ConfigMap by another hand reaches no server, this
// pod's own included; the same plan, sealed, is followed. The empty plan
// the ConfigMap holds between moves is no plan: nothing is dialed or said
// (and a follower given no poll polls each second).
func TestAFollowerFollowsOnlyASealedPlan(t *testing.T) {
	// Every server of the plan is this listener: any dial of the
	// follower's reaches it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dials atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			c.Close()
		}
	}()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	node := func(name string) discovery.Node {
		n := discovery.Node{Host: name + ".c.ns.svc", IP: host}
		p, _ := net.LookupPort("tcp", port)
		n.Port = int32(p)
		return n
	}
	from := discovery.Cluster{Version: 3, Nodes: []discovery.Node{node("c-0")}}
	to := discovery.Cluster{Version: 4, Nodes: []discovery.Node{node("c-0"), node("c-9")}}
	plan := []byte(move.Plan{ID: 4, Ring: ring.Libmemcached, Step: move.StepCopy, From: string(from.Body()), To: string(to.Body())}.Marshal())

	follow := func(plan []byte, seal discovery.Seal, poll time.Duration) (int32, string) {
		dir := t.TempDir()
		planFile, sealFile := filepath.Join(dir, "move"), filepath.Join(dir, discovery.SealFile)
		if err := os.WriteFile(planFile, plan, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(sealFile, []byte(seal.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		dials.Store(0)
		var log bytes.Buffer
		f := &move.Follower{
			Mover: &move.Mover{Dial: func(ctx context.Context, addr string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			}},
			PlanFile: planFile, SealFile: sealFile, Host: "c-0", Local: ln.Addr().String(),
			Poll: poll, Log: slog.New(slog.NewJSONHandler(&log, nil)),
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		f.Run(ctx)
		return dials.Load(), log.String()
	}

	const poll = 20 * time.Millisecond
	if n, log := follow(plan, discovery.SealOf(from.Body(), nil), poll); n != 0 || !bytes.Contains([]byte(log), []byte("the plan is not sealed")) {
		t.Fatalf("an unsealed plan: %d dials, log:\n%s", n, log)
	}
	if n, log := follow(plan, discovery.SealOf(from.Body(), plan), poll); n == 0 {
		t.Fatalf("the sealed plan was not followed, log:\n%s", log)
	}
	if n, log := follow(nil, discovery.SealOf(from.Body(), nil), 0); n != 0 || log != "" {
		t.Fatalf("no plan: %d dials, log:\n%s", n, log)
	}
}
