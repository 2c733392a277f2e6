package move_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/ring"
)

// A server that answers with a line longer than memcached ever sends is
// not read further: the mover fails, rather than hold all it sends.
func TestAnOverlongLineIsNotFollowed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sent := make(chan int, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		_, _ = c.Read(buf)
		// A key line of 64 MiB that never ends, written until the mover
		// hangs up.
		chunk := []byte("key=" + strings.Repeat("a", 1<<20))
		n := 0
		for n < 64 {
			if _, err := c.Write(chunk); err != nil {
				break
			}
			n++
		}
		sent <- n
	}()
	after, err := ring.New(ring.Libmemcached, []string{"other:11211"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = (&move.Mover{Dial: func(ctx context.Context, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
	}}).Copy(context.Background(), "self:11211", after)
	if err == nil || !strings.Contains(err.Error(), "line of more than") {
		t.Fatalf("Copy: %v, want the overlong line refused", err)
	}
	ln.Close()
	if n := <-sent; n >= 64 {
		t.Errorf("the mover read all %d MiB of the line", n)
	}
}
