package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/bradfitz/gomemcache/memcache"

	"github.com/example/memcached-operator/internal/testsupport/proc"
)

// workload is the fixed mix every target is driven with.
type workload struct {
	concurrency int     // goroutines, each with its own connection per server
	keys        int     // the key space, stored before measuring
	valueSize   int     // bytes per value
	getRatio    float64 // share of gets; the rest are sets
	warmUp      time.Duration
	duration    time.Duration
}

// access is how a client reaches memcached: TLS and the authentication
// exchange, when the target asks for them.
type access struct {
	tls  *tls.Config // nil: plain text
	user string      // empty: no authentication
	pass string
}

// newClient is a gomemcache client of the servers sel picks from, with
// one idle connection kept per goroutine and server, so that connections
// are reused as a long-running client's are.
func newClient(sel memcache.ServerSelector, a access, conns int) *memcache.Client {
	c := memcache.NewFromSelector(sel)
	c.MaxIdleConns = conns
	c.Timeout = time.Second
	c.DialContext = a.dial
	return c
}

// dial connects as a, then authenticates if a has a user: memcached's
// ASCII authentication is a set whose value is "user password", answered
// STORED.
func (a access) dial(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	var conn net.Conn
	var err error
	if a.tls != nil {
		conn, err = (&tls.Dialer{NetDialer: &d, Config: a.tls}).DialContext(ctx, network, address)
	} else {
		conn, err = d.DialContext(ctx, network, address)
	}
	if err != nil || a.user == "" {
		return conn, err
	}
	cred := a.user + " " + a.pass
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(conn, "set auth 0 0 %d\r\n%s\r\n", len(cred), cred); err != nil {
		conn.Close()
		return nil, err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		conn.Close()
		return nil, err
	}
	if strings.TrimSpace(line) != "STORED" {
		conn.Close()
		return nil, fmt.Errorf("authentication to %s: %s", address, strings.TrimSpace(line))
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}

// result is what one measured run gave.
type result struct {
	ops, errors int64
	elapsed     time.Duration
	// cpu is the CPU seconds of the client (this process) and of every
	// memcached process on this machine in the window.
	clientCPU, memcachedCPU float64
	latency                 *hdrhistogram.Histogram // microseconds
	firstError              string
}

func (r result) opsPerSecond() float64 { return float64(r.ops) / r.elapsed.Seconds() }

// percentile is the latency at q (0-100).
func (r result) percentile(q float64) time.Duration {
	return time.Duration(r.latency.ValueAtQuantile(q)) * time.Microsecond
}

func keyOf(i int) string { return fmt.Sprintf("bench-%07d", i) }

// valueOf is the value stored by store number round: the round's number,
// then padding to size bytes, so that a read tells a value of this round
// from an older one.
func valueOf(round, size int) []byte {
	v := make([]byte, size)
	copy(v, fmt.Sprintf("round-%06d", round))
	return v
}

// roundOf is the round a value was stored in, or -1.
func roundOf(v []byte) int {
	var r int
	if _, err := fmt.Sscanf(string(v[:min(len(v), 12)]), "round-%06d", &r); err != nil {
		return -1
	}
	return r
}

// store sets every key of w to round's value, from concurrency goroutines.
func store(ctx context.Context, c *memcache.Client, w workload, round int) error {
	value := valueOf(round, w.valueSize)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, w.concurrency)
	for range w.concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= w.keys || ctx.Err() != nil {
					return
				}
				if err := c.Set(&memcache.Item{Key: keyOf(i), Value: value}); err != nil {
					errs <- fmt.Errorf("storing %s: %w", keyOf(i), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return errors.Join(<-errs, ctx.Err())
}

// drive runs w's mix against c: a warm-up, then the measured window.
func drive(ctx context.Context, c *memcache.Client, w workload) result {
	var measuring atomic.Bool
	stop := make(chan struct{})
	parts := make([]loadPart, w.concurrency)
	var wg sync.WaitGroup
	for g := range w.concurrency {
		parts[g].hist = hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
		wg.Go(func() { parts[g].run(c, w, uint64(g), &measuring, stop) })
	}
	sleep(ctx, w.warmUp)
	client0, memcached0 := cpu()
	measuring.Store(true)
	begin := time.Now()
	sleep(ctx, w.duration)
	measuring.Store(false)
	elapsed := time.Since(begin)
	client1, memcached1 := cpu()
	close(stop)
	wg.Wait()
	r := result{elapsed: elapsed, clientCPU: client1 - client0, memcachedCPU: memcached1 - memcached0, latency: hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)}
	for _, p := range parts {
		r.ops += p.ops
		r.errors += p.errors
		r.latency.Merge(p.hist)
		if r.firstError == "" {
			r.firstError = p.firstError
		}
	}
	return r
}

// loadPart is what one goroutine of a load measured.
type loadPart struct {
	ops, errors int64
	hist        *hdrhistogram.Histogram
	firstError  string
}

// run sends w's gets and sets through c until stop, counting those sent
// while measuring; seed makes its keys its own.
func (p *loadPart) run(c *memcache.Client, w workload, seed uint64, measuring *atomic.Bool, stop <-chan struct{}) {
	value := make([]byte, w.valueSize)
	rng := rand.New(rand.NewPCG(seed, 1))
	for {
		select {
		case <-stop:
			return
		default:
		}
		k := keyOf(rng.IntN(w.keys))
		start := time.Now()
		var err error
		if rng.Float64() < w.getRatio {
			_, err = c.Get(k)
			if errors.Is(err, memcache.ErrCacheMiss) {
				err = nil
			}
		} else {
			err = c.Set(&memcache.Item{Key: k, Value: value})
		}
		took := time.Since(start)
		if !measuring.Load() {
			continue
		}
		p.ops++
		if err != nil {
			p.errors++
			if p.firstError == "" {
				p.firstError = err.Error()
			}
			continue
		}
		_ = p.hist.RecordValue(took.Microseconds())
	}
}

// cpu is the CPU seconds so far of this process and of the memcached
// processes on this machine (the host's, or the real node's containers').
func cpu() (client, memcached float64) {
	for _, pid := range proc.Named("memcached") {
		memcached += proc.CPUSeconds(pid)
	}
	return proc.CPUSeconds(os.Getpid()), memcached
}

// cpuPerOp is CPU seconds spread over r's operations, in µs.
func (r result) cpuPerOp(seconds float64) float64 { return seconds * 1e6 / float64(r.ops) }

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
