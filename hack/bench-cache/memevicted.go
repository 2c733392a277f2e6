package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/example/memcached-operator/pkg/memcachedconn"
)

// evictionWatch reads the evictions of each memcached the client follows
// every second while an operation runs: a key an operation loses to the
// memory of the slots that hold it is an eviction, not a move's miss.
type evictionWatch struct {
	mu   sync.Mutex
	seen map[string]*incarnation
	stop context.CancelFunc
	done chan struct{}
}

// incarnation is one memcached process of a slot: its evictions when
// first and last read.
type incarnation struct{ first, last uint64 }

// watchEvictions starts reading the evictions of r's memcacheds, as a,
// from start on: a memcached started since counts from 0.
func watchEvictions(ctx context.Context, r *ring, a access, start time.Time) *evictionWatch {
	ctx, stop := context.WithCancel(ctx)
	w := &evictionWatch{seen: map[string]*incarnation{}, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			for _, addr := range r.list() {
				w.read(ctx, a, addr, start)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return w
}

// read takes one reading of addr's evictions; a memcached that cannot be
// read now (being replaced) is read at the next.
func (w *evictionWatch) read(ctx context.Context, a access, addr string, start time.Time) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	stats, err := memcachedStats(rctx, a, addr)
	if err != nil {
		return
	}
	evictions, err1 := strconv.ParseUint(stats["evictions"], 10, 64)
	now, err2 := strconv.ParseInt(stats["time"], 10, 64)
	uptime, err3 := strconv.ParseInt(stats["uptime"], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return
	}
	id := fmt.Sprintf("%s/%d", addr, now-uptime)
	w.mu.Lock()
	defer w.mu.Unlock()
	in := w.seen[id]
	if in == nil {
		in = &incarnation{first: evictions}
		if now-uptime >= start.Unix()-1 {
			in.first = 0
		}
		w.seen[id] = in
	}
	in.last = max(in.last, evictions)
}

// total stops the readings and returns the evictions they saw.
func (w *evictionWatch) total() uint64 {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	var n uint64
	for _, in := range w.seen {
		n += in.last - min(in.first, in.last)
	}
	return n
}

// memcachedStats is the answer of addr's memcached to "stats", as a.
func memcachedStats(ctx context.Context, a access, addr string) (map[string]string, error) {
	conn, err := a.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(d); err != nil {
			return nil, err
		}
	}
	return memcachedconn.Stats(conn)
}
