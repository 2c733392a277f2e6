//go:build integration

package discovery_test

import (
	"path/filepath"
	"sync/atomic"
	"testing"

	testendpoint "github.com/example/memcached-operator/internal/testsupport/endpoint"
	"github.com/example/memcached-operator/internal/testsupport/memcachedproc"
	"github.com/example/memcached-operator/pkg/discovery"
)

// TestTheEndpointSaysWhetherItsPodIsLeaving: a peer about to copy keys
// asks whether the pod is handing its keys off ("config get leaving"):
// the answer follows Config.Leaving, on the same connection, and an
// endpoint that cannot tell (no Leaving) says it is not.
func TestTheEndpointSaysWhetherItsPodIsLeaving(t *testing.T) {
	m := memcachedproc.Start(t)
	path := filepath.Join(t.TempDir(), "cluster")
	publish(t, path, three)
	var leaving atomic.Bool
	addr := testendpoint.Serve(t, "127.0.0.1", discovery.Config{Membership: path, Memcached: m.Addr, Leaving: leaving.Load})
	conn, r := dial(t, addr)
	if got, want := exchange(t, conn, r, "config get leaving\r\n", end), "CONFIG leaving 0 1\r\n0\r\nEND\r\n"; got != want {
		t.Errorf("not leaving: %q, want %q", got, want)
	}
	leaving.Store(true)
	if got, err := discovery.AskLeaving(conn); err != nil || !got {
		t.Errorf("leaving: AskLeaving says %v, %v", got, err)
	}
	// The same connection still answers the clients' question.
	if got, err := discovery.Ask(conn); err != nil || got.Version != three.Version {
		t.Errorf("Ask after AskLeaving: %+v, %v", got, err)
	}

	without := testendpoint.Serve(t, "127.0.0.1", discovery.Config{Membership: path, Memcached: m.Addr})
	conn, _ = dial(t, without)
	if got, err := discovery.AskLeaving(conn); err != nil || got {
		t.Errorf("an endpoint without Leaving: AskLeaving says %v, %v", got, err)
	}
}

// TestAnEndpointThatDoesNotKnowTheQuestionIsAnError: an endpoint from
// before the question answers ERROR, which AskLeaving does not take for
// an answer.
func TestAnEndpointThatDoesNotKnowTheQuestionIsAnError(t *testing.T) {
	m := memcachedproc.Start(t)
	conn, _ := dial(t, m.Addr) // memcached itself: config get is not its command
	if got, err := discovery.AskLeaving(conn); err == nil {
		t.Errorf("memcached asked whether it is leaving: %v, no error", got)
	}
}
