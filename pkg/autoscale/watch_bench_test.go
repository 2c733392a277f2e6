//go:build integration

package autoscale

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/memcached-operator/internal/testsupport/memcachedproc"
)

// BenchmarkGetsWhileFollowed measures what following a memcached's gets
// costs it: gets of 1 KiB values by 8 connections, each waiting for its
// answer, against a memcached of 2 threads, with no one watching and with
// a pod following its gets (the reuse distances counted). It reports the
// gets a second, and the share of gets memcached logged for the watcher.
//
//	go test -tags integration -run '^$' -bench GetsWhileFollowed -benchtime 400000x ./pkg/autoscale
func BenchmarkGetsWhileFollowed(b *testing.B) {
	for _, followed := range []bool{false, true} {
		b.Run(fmt.Sprintf("followed=%v", followed), func(b *testing.B) {
			addr := memcachedproc.StartOn(b, "127.0.0.123", "-m", "64", "-t", "2").Addr
			dial := func(ctx context.Context) (net.Conn, error) { return (&net.Dialer{}).DialContext(ctx, "tcp", addr) }
			value := strings.Repeat("v", 1024)
			conns := make([]*bufio.ReadWriter, 8)
			for i := range conns {
				c, err := dial(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				conns[i] = bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c))
			}
			for i := range 10000 {
				roundTrip(b, conns[0], fmt.Sprintf("set key:%d 0 0 %d\r\n%s\r\n", i, len(value), value), "STORED\r\n")
			}
			k := &keyStream{dial: dial, log: slog.New(slog.DiscardHandler)}
			if followed {
				k.reuse(time.Now().Unix(), 60)
				time.Sleep(500 * time.Millisecond)
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			for c, rw := range conns {
				wg.Go(func() {
					for i := c; i < b.N; i += len(conns) {
						roundTrip(b, rw, fmt.Sprintf("get key:%d\r\n", i%10000), "END\r\n")
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "gets/s")
			if followed {
				time.Sleep(time.Second)
				k.mu.Lock()
				r := k.counts.over(time.Now().Unix(), 600)
				k.mu.Unlock()
				b.ReportMetric(r.Coverage, "coverage")
			}
		})
	}
}

// roundTrip sends req and reads until the line that ends its answer.
func roundTrip(b *testing.B, rw *bufio.ReadWriter, req, end string) {
	if _, err := rw.WriteString(req); err != nil {
		b.Error(err)
		return
	}
	if err := rw.Flush(); err != nil {
		b.Error(err)
		return
	}
	for {
		line, err := rw.ReadString('\n')
		if err != nil {
			b.Error(err)
			return
		}
		if line == end {
			return
		}
	}
}
