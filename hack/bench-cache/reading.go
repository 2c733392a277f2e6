package main

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/bradfitz/gomemcache/memcache"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// kept reads every one of keys keys once and counts those found with
// round's value, and those found with an older one. It reads on new
// connections: a pooled one to a memcached that restarted in place since
// it was opened fails once (EOF), which the reads during the operation
// count.
func kept(ctx context.Context, c *memcache.Client, keys, round int) (current, stale int, err error) {
	_ = c.Close() // the idle connections; c stays usable
	var found, old atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= keys || ctx.Err() != nil {
					return
				}
				it, err := c.Get(keyOf(i))
				switch {
				case err == nil && roundOf(it.Value) == round:
					found.Add(1)
				case err == nil:
					old.Add(1)
				case errors.Is(err, memcache.ErrCacheMiss):
				default:
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return int(found.Load()), int(old.Load()), errors.Join(<-errs, ctx.Err())
}

// reader is a client reading random keys at a steady rate while an
// operation runs, as an application would: it counts misses and errors.
type reader struct {
	reads, misses atomic.Int64
	mu            sync.Mutex
	// latency is each answered get's (a value or a miss), µs.
	latency *hdrhistogram.Histogram
	// errors are by the name of the server the key's get went to.
	errors          map[string]int64
	firstError      string
	firstAt, lastAt time.Time
	done            chan struct{}
	wg              sync.WaitGroup
}

// picked is a goroutine's selector over a ring: it remembers the name of
// the server its last get went to, so that an error is told to the slot
// it came from even when the ring changes meanwhile.
type picked struct {
	*ring
	last string
}

func (p *picked) PickServer(key string) (net.Addr, error) {
	name, a, err := p.pick(key)
	p.last = name
	return a, err
}

// startReading reads keys through servers as a, each goroutine with a
// client of its own.
func startReading(ctx context.Context, servers *ring, a access, keys int) *reader {
	r := &reader{done: make(chan struct{}), errors: map[string]int64{}, latency: hdrhistogram.New(1, 10_000_000, 3)}
	for g := range readers {
		sel := &picked{ring: servers}
		c := newClient(sel, a, 1)
		r.wg.Go(func() {
			defer c.Close()
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			tick := time.NewTicker(readInterval)
			defer tick.Stop()
			for {
				select {
				case <-r.done:
					return
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				key := keyOf(rng.IntN(keys))
				start := time.Now()
				_, err := c.Get(key)
				took := time.Since(start)
				r.reads.Add(1)
				if err == nil || errors.Is(err, memcache.ErrCacheMiss) {
					r.mu.Lock()
					_ = r.latency.RecordValue(took.Microseconds())
					r.mu.Unlock()
				}
				switch {
				case err == nil:
				case errors.Is(err, memcache.ErrCacheMiss):
					r.misses.Add(1)
				default:
					now := time.Now()
					r.mu.Lock()
					r.errors[sel.last]++
					if r.firstError == "" {
						r.firstError, r.firstAt = err.Error(), now
					}
					r.lastAt = now
					r.mu.Unlock()
				}
			}
		})
	}
	return r
}

func (r *reader) stop() {
	close(r.done)
	r.wg.Wait()
}

// errorsOn is how many errors the reads saw, how many of them on the
// servers stayed names, and the time from the first to the last.
func (r *reader) errorsOn(stayed map[string]bool) (all, onStayed int64, span time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, n := range r.errors {
		all += n
		if stayed[name] {
			onStayed += n
		}
	}
	return all, onStayed, r.lastAt.Sub(r.firstAt)
}

// p99 is the 99th percentile of the answered gets' latency.
func (r *reader) p99() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Duration(r.latency.ValueAtQuantile(99)) * time.Microsecond
}

func (r *reader) first() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstError
}

// eventsSince are the notes of m's events of reason from since on, oldest
// first.
func eventsSince(ctx context.Context, c client.Client, m *cachev1alpha1.Memcached, reason string, since time.Time) ([]string, error) {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(m.Namespace)); err != nil {
		return nil, err
	}
	evs := slices.DeleteFunc(list.Items, func(ev eventsv1.Event) bool {
		return ev.Regarding.Name != m.Name || ev.Regarding.Kind != cachev1alpha1.Kind || ev.Reason != reason || ev.EventTime.Time.Before(since)
	})
	slices.SortStableFunc(evs, func(a, b eventsv1.Event) int { return a.EventTime.Time.Compare(b.EventTime.Time) })
	notes := make([]string, len(evs))
	for i, ev := range evs {
		notes[i] = ev.Note
	}
	return notes, nil
}

// allEvents is every note of eventsSince in one line, or "none".
func allEvents(ctx context.Context, c client.Client, m *cachev1alpha1.Memcached, reason string, since time.Time) (string, error) {
	notes, err := eventsSince(ctx, c, m, reason, since)
	return cmp.Or(strings.Join(notes, "; "), "none"), err
}

// lastEvent is the note of the last event of reason about m since since,
// or "none".
func lastEvent(ctx context.Context, c client.Client, m *cachev1alpha1.Memcached, reason string, since time.Time) (string, error) {
	notes, err := eventsSince(ctx, c, m, reason, since)
	if len(notes) == 0 {
		return "none", err
	}
	return notes[len(notes)-1], err
}

// readers and readInterval set the reading rate: 4 goroutines, each at
// most one get per 2 ms (2,000 gets a second in all), load that leaves the
// machine to the rollout.
const (
	readers      = 4
	readInterval = 2 * time.Millisecond
)
