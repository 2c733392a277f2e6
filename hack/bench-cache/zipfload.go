package main

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"golang.org/x/time/rate"
)

const (
	// zipfGetsPerSecond is each autoscaling run's load, from zipfWorkers
	// goroutines.
	zipfGetsPerSecond = 1500
	zipfWorkers       = 4
	// zipfS and zipfV shape the popularity: key k is read in proportion
	// to 1/(zipfV+k)^zipfS, a Zipf-like law whose head is flattened, so
	// that the hit ratio depends on how much of the working set is held.
	zipfS = 1.01
	zipfV = 1000
)

// zipfLoad reads keys of a Zipf-like popularity over its working set
// through c as a cache-aside client does: a miss is followed by a set of
// the key (as if read from a database), so that what is read is stored.
type zipfLoad struct {
	c          *memcache.Client
	keys       atomic.Int64
	gets, hits atomic.Int64
	value      []byte
}

func newZipfLoad(c *memcache.Client, keys int) *zipfLoad {
	l := &zipfLoad{c: c, value: valueOf(0, 1024)}
	l.keys.Store(int64(keys))
	return l
}

// setKeys changes the working set to keys keys (the most read first).
func (l *zipfLoad) setKeys(keys int) { l.keys.Store(int64(keys)) }

// take returns the gets and hits since the last take.
func (l *zipfLoad) take() (gets, hits int) {
	return int(l.gets.Swap(0)), int(l.hits.Swap(0))
}

// run drives the load until ctx ends.
func (l *zipfLoad) run(ctx context.Context) {
	limit := rate.NewLimiter(zipfGetsPerSecond, zipfWorkers)
	var wg sync.WaitGroup
	for w := range zipfWorkers {
		wg.Go(func() {
			src := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			keys := int64(0)
			var z *rand.Zipf
			for limit.Wait(ctx) == nil {
				if n := l.keys.Load(); n != keys {
					keys, z = n, rand.NewZipf(src, zipfS, zipfV, uint64(n-1))
				}
				key := keyOf(int(z.Uint64()))
				_, err := l.c.Get(key)
				l.gets.Add(1)
				switch err {
				case nil:
					l.hits.Add(1)
				case memcache.ErrCacheMiss:
					_ = l.c.Set(&memcache.Item{Key: key, Value: l.value})
				}
			}
		})
	}
	wg.Wait()
}
