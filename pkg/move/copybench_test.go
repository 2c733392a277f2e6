//go:build integration

package move_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/example/memcached-operator/pkg/memcachedconn"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/ring"
)

// BenchmarkAHandOffOverTLS: a pod's hand-off as bench-cache makes it, on
// localhost: 30,000 keys of 1 KiB copied from one memcached to the two
// others a ring of them gives them, over TLS with a login, unbounded, in
// one lane and in the default four (go test -tags integration -bench
// HandOffOverTLS -benchtime 5x ./pkg/move). MB/s counts the values copied;
// each copy lists the keys twice, as every copy does.
func BenchmarkAHandOffOverTLS(b *testing.B) {
	const n, size = 30000, 1024
	dir := tlsFiles(b)
	c := start(b, "127.0.0.89", 3, tlsArgs(dir)...)
	from := c.names[0]
	fillWith(b, secure, from, n, size)
	after, err := ring.New(ring.Libmemcached, c.names[1:])
	if err != nil {
		b.Fatal(err)
	}
	for _, lanes := range []int{1, 4} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			mover := &move.Mover{Dial: secure, Lanes: lanes}
			b.SetBytes(n * size)
			for b.Loop() {
				b.StopTimer()
				for _, to := range c.names[1:] {
					fillWith(b, secure, to, 0, 0)
				}
				b.StartTimer()
				res, err := mover.Copy(context.Background(), from, after)
				if err != nil || res.Copied != n {
					b.Fatalf("%+v %v", res.Copied, err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
		})
	}
}

// BenchmarkCopy100000Keys: a memcached's 100,000 keys (100-byte values)
// copied to another, unbounded, in the clear and over TLS with a login as
// the pods copy (go test -tags integration -bench Copy -benchtime 3x
// ./pkg/move). MB/s counts the values copied.
func BenchmarkCopy100000Keys(b *testing.B) {
	const n, size = 100000, 100
	dir := tlsFiles(b)
	for _, bc := range []struct {
		name string
		args []string
		dial move.Dialer
	}{
		{"clear", nil, plain},
		{"TLS", tlsArgs(dir), secure},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			c := start(b, "127.0.0.88", 2, bc.args...)
			from, to := c.names[0], c.names[1]
			fillWith(b, bc.dial, from, n, size)
			after, err := ring.New(ring.Libmemcached, []string{to})
			if err != nil {
				b.Fatal(err)
			}
			mover := &move.Mover{Dial: bc.dial}
			b.SetBytes(n * size)
			for b.Loop() {
				b.StopTimer()
				fillWith(b, bc.dial, to, 0, 0)
				b.StartTimer()
				res, err := mover.Copy(ctx, from, after)
				if err != nil || res.Copied != n {
					b.Fatalf("%+v %v", res.Copied, err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
		})
	}
}

// fillWith empties server, then stores n keys of size-byte values on it.
func fillWith(b *testing.B, dial move.Dialer, server string, n, size int) {
	b.Helper()
	conn, err := dial(context.Background(), server)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	if reply, err := memcachedconn.Command(conn, "flush_all\r\n"); err != nil || reply != "OK" {
		b.Fatalf("flush_all: %q %v", reply, err)
	}
	value := strings.Repeat("x", size)
	// At most about 15 KiB a write: memcached over TLS stalls on a value
	// across two records (recordBudget).
	per := max(1, min(50, (15<<10)/(size+32)))
	for first := 0; first < n; first += per {
		var req strings.Builder
		for i := first; i < min(first+per, n); i++ {
			fmt.Fprintf(&req, "ms key-%d %d q\r\n%s\r\n", i, size, value)
		}
		req.WriteString("mn\r\n")
		if reply, err := memcachedconn.Command(conn, req.String()); err != nil || reply != "MN" {
			b.Fatalf("filling: %q %v", reply, err)
		}
	}
}

// secure dials server over TLS and logs in as the pods' mover does.
func secure(ctx context.Context, server string) (net.Conn, error) {
	return memcachedconn.Dial(ctx, memcachedconn.Options{Address: server, TLS: true, Login: "mover:secret"})
}
