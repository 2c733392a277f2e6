// Package endpoint serves a discovery endpoint (pkg/discovery) for a test,
// on the loopback, until the test ends.
package endpoint

import (
	"context"
	"net"
	"testing"

	"github.com/example/memcached-operator/pkg/discovery"
)

// Serve serves c on a free port of host (an address of the loopback) until
// t ends, and returns its address; t fails if Serve returned an error.
func Serve(t testing.TB, host string, c discovery.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	srv := discovery.New(c)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// Free returns an address of the loopback that nothing listens on: a port
// just freed, for a server a test starts there or a request that must
// find no one.
func Free(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
