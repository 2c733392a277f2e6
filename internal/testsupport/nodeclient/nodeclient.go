// Package nodeclient runs, for tests, memcached clients no one here wrote
// that implement ElastiCache's auto discovery: the npm package
// memcached-elasticache (hack/clients; make clients installs it), driven by
// hack/clients/elasticache.js.
package nodeclient

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/internal/testsupport/repo"
)

// Client is one memcached-elasticache client in a process of its own, for
// the life of the test that started it (its subtests may use it).
type Client struct {
	stdin  io.Writer
	events chan map[string]any
}

// Options are how the client runs.
type Options struct {
	// Interval is how often it asks the endpoint for the membership.
	Interval time.Duration
	// DNSServer, when set, resolves the names ending in .svc (a Service's,
	// a slot's) for the client, as the cluster's DNS does for a pod.
	DNSServer string
}

// Start runs a client of endpoint until the test ends.
func Start(t testing.TB, endpoint string, o Options) *Client {
	t.Helper()
	modules := repo.Path("bin", "clients", "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "memcached-elasticache")); err != nil {
		t.Fatalf("the Node clients are not installed (make clients): %v", err)
	}
	cmd := exec.Command("node", repo.Path("hack", "clients", "elasticache.js"), endpoint, fmt.Sprint(o.Interval.Milliseconds()))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "DNS_SERVER="+o.DNSServer)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := &Client{stdin: stdin, events: make(chan map[string]any, 1000)}
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			var e map[string]any
			if err := json.Unmarshal(s.Bytes(), &e); err != nil {
				t.Errorf("the client wrote %q: %v", s.Text(), err)
				continue
			}
			c.events <- e
		}
		close(c.events)
	}()
	return c
}

// Next returns the next event named name within timeout, skipping others;
// t is the test that waits.
func (c *Client) Next(t testing.TB, name string, timeout time.Duration) map[string]any {
	t.Helper()
	return c.next(t, name, timeout, nil, nil)
}

// Discovered waits within timeout for the client to discover exactly
// nodes ("host:port", sorted), skipping the memberships it discovered
// before (a pod's copy of the membership may lag the operator's, and the
// client reports each one it takes).
func (c *Client) Discovered(t testing.TB, nodes []string, timeout time.Duration) {
	t.Helper()
	var seen [][]string
	c.next(t, "discover", timeout, func(e map[string]any) bool {
		got := Nodes(e)
		seen = append(seen, got)
		return slices.Equal(got, nodes)
	}, func() string { return fmt.Sprintf("the client discovered %v, never %v", seen, nodes) })
}

func (c *Client) next(t testing.TB, name string, timeout time.Duration, match func(map[string]any) bool, explain func() string) map[string]any {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case e, ok := <-c.events:
			if !ok {
				t.Fatalf("the client exited before a %s event", name)
			}
			if e["event"] == name && (match == nil || match(e)) {
				return e
			}
		case <-deadline:
			if explain != nil {
				t.Log(explain())
			}
			t.Fatalf("no %s event from the client within %s", name, timeout)
		}
	}
}

// Do sends command ("set <n> <prefix>", "get <n> <prefix>") and returns
// its answer.
func (c *Client) Do(t testing.TB, command string) map[string]any {
	t.Helper()
	if _, err := io.WriteString(c.stdin, command+"\n"); err != nil {
		t.Fatal(err)
	}
	return c.Next(t, strings.Fields(command)[0], time.Minute)
}

// Nodes is what a discover event lists: "host:port", sorted as the client
// keeps them.
func Nodes(e map[string]any) []string {
	var out []string
	for _, n := range e["nodes"].([]any) {
		out = append(out, n.(string))
	}
	return out
}

// Count is a number an answer holds.
func Count(e map[string]any, key string) int {
	n, _ := e[key].(float64)
	return int(n)
}
