package move_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"
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

// A listing that finds memcached's crawler busy (another listing of the
// server runs) waits for it and lists again, rather than take the busy
// answer for an empty server.
func TestABusyCrawlerIsWaitedFor(t *testing.T) {
	var dumps atomic.Int32
	res, err := copyFrom(t, func(line string) string {
		switch {
		case strings.HasPrefix(line, "lru_crawler metadump") && dumps.Add(1) == 1:
			return "BUSY currently processing crawler request\r\n"
		case strings.HasPrefix(line, "lru_crawler metadump"):
			return "key=k exp=-1 la=1 cas=7 fetch=no cls=1 size=64\r\nEND\r\n"
		}
		return "EN\r\n" // gone since
	})
	if err != nil || res.Listed != 1 || res.Gone != 1 || dumps.Load() < 2 {
		t.Errorf("after a busy crawler: %+v, %v, %d listings asked", res, err, dumps.Load())
	}
}

// A value answered without the flags, time to live and CAS the mover asks
// for is not memcached's answer: the copy fails, rather than take a
// missing time to live for "expiring now".
func TestAValueWithoutItsFlagsIsRefused(t *testing.T) {
	for _, answer := range []string{"VA 1 f0 c5", "VA 1 t-1 c5", "VA 1 f0 t-1", "VA 1"} {
		_, err := copyFrom(t, func(line string) string {
			if strings.HasPrefix(line, "lru_crawler metadump") {
				return "key=k exp=-1 la=1 cas=7 fetch=no cls=1 size=64\r\nEND\r\n"
			}
			return answer + "\r\nx\r\n"
		})
		if err == nil || !strings.Contains(err.Error(), "not the flags, time to live and CAS asked") {
			t.Errorf("%q: %v, want it refused", answer, err)
		}
	}
}

// copyFrom copies, to a server of its own, the keys of a server whose
// every connection answers each request line with answer(line).
func copyFrom(t *testing.T, answer func(line string) string) (move.CopyResult, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					_, _ = io.WriteString(c, answer(line))
				}
			}()
		}
	}()
	after, err := ring.New(ring.Libmemcached, []string{"other:11211"})
	if err != nil {
		t.Fatal(err)
	}
	return (&move.Mover{Dial: func(ctx context.Context, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
	}}).Copy(context.Background(), "self:11211", after)
}
