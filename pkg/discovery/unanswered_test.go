//go:build integration

package discovery_test

import (
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/example/memcached-operator/pkg/discovery"
)

// A memcached that takes no connection (its listen queue full: SYNs
// dropped, as a hung process's are) is given up within the endpoint's
// dial timeout of 5 s: the client is told, rather than wait for the
// kernel's own give-up two minutes on.
func TestAMemcachedThatTakesNoConnectionIsGivenUp(t *testing.T) {
	upstream := fullListenQueue(t)
	membership := filepath.Join(t.TempDir(), "cluster")
	publish(t, membership, discovery.Cluster{Version: 1})
	conn, r := dial(t, endpoint(t, membership, upstream, 30*time.Second))
	start := time.Now()
	reply := exchange(t, conn, r, "get k\r\n", oneLine)
	if !strings.HasPrefix(reply, "SERVER_ERROR") {
		t.Errorf("the client was answered %q, want SERVER_ERROR", reply)
	}
	t.Logf("answered after %s", time.Since(start))
}

// fullListenQueue listens on a port of 127.0.0.1 with a queue of one
// connection, fills it, and returns the address: a further connection's
// SYN is dropped.
func fullListenQueue(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := (&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*syscall.SockaddrInet4).Port}).String()
	for range 10 {
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err != nil {
			return addr // the queue is full
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatal("the listen queue never filled")
	return ""
}
