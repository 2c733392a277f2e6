package autoscale

import (
	"container/list"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// lru is an LRU cache of items by their bytes, as a cache in front of a
// database fills it: a miss stores the item.
type lru struct {
	capacity, used int64
	order          *list.List
	at             map[string]*list.Element
	hits           int
}

type lruItem struct {
	key   string
	bytes int64
}

func newLRU(capacity int64) *lru {
	return &lru{capacity: capacity, order: list.New(), at: map[string]*list.Element{}}
}

func (c *lru) get(key string, bytes int64) {
	if e, ok := c.at[key]; ok {
		c.hits++
		c.order.MoveToFront(e)
		return
	}
	c.at[key] = c.order.PushFront(lruItem{key, bytes})
	c.used += bytes
	for c.used > c.capacity {
		last := c.order.Back()
		it := c.order.Remove(last).(lruItem)
		delete(c.at, it.key)
		c.used -= it.bytes
	}
}

// mixedGets are gets of keys each with its own value size from 100 to
// 2,000 bytes: 60% of them of a set of 2,000 keys read evenly (about 2.2
// MiB of items, which a cache holds whole or loses a share of), the rest
// of Zipf-like popularity over all keys, so that the hit ratio lost to
// half the size is not the same at every size.
func mixedGets(seed uint64, keys, n int) (names []string, sizes []int64) {
	r := rand.New(rand.NewPCG(seed, 1))
	z := rand.NewZipf(r, 1.05, 4, uint64(keys-1))
	for range n {
		k := int(z.Uint64())
		if r.Float64() < 0.6 {
			k = r.IntN(2000)
		}
		names = append(names, fmt.Sprintf("key:%d", k))
		sizes = append(sizes, 100+int64(k*7919)%1901)
	}
	return names, sizes
}

// TestTheReuseDistancesTellTheHitRatioAtAnotherSize: the gets of a key
// stream (mixedGets), told to the pod as memcached logs them (a miss, then the
// store's own lookup), give the hit ratio an LRU cache of one size loses
// against another, for sizes from 256 KiB to 4 MiB, as an LRU cache of
// each size loses it on the same gets: exactly when every key is
// followed, and with a sample of 60,000 keys (SHARDS, MaxFollowed) within 1
// point on average and 3 at worst from each size to its half (what one
// slot fewer of two is, the largest step a scale-down takes) over eight
// samples (salts), and 2 points at worst between any two sizes (the
// smallest, served by a few keys the sample may miss, against the
// largest; without SHARDS' adjustment, 2.4).
func TestTheReuseDistancesTellTheHitRatioAtAnotherSize(t *testing.T) {
	capacities := []int64{256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20}
	for _, keys := range []int{4000, 60000} {
		t.Run(fmt.Sprintf("%d keys", keys), func(t *testing.T) {
			names, sizes := mixedGets(uint64(keys), keys, 300000)
			caches := make([]*lru, len(capacities))
			for i, c := range capacities {
				caches[i] = newLRU(c)
			}
			hit := make([]bool, len(names))
			for i, key := range names {
				_, hit[i] = caches[2].at[key]
				for _, c := range caches {
					c.get(key, int64(len(key))+sizes[i]+itemOverhead)
				}
			}
			var sum, worst, worstHalf float64
			var n int
			for salt := range uint64(8) {
				r := reuseOf(names, sizes, hit, salt)
				gets := float64(len(names)) / float64(r.Seconds)
				for i := range capacities {
					for j := range i {
						est := (r.hitsWithin(float64(capacities[i])) - r.hitsWithin(float64(capacities[j]))) / gets
						real := float64(caches[i].hits-caches[j].hits) / float64(len(names))
						t.Logf("salt %d, %d KiB to %d KiB: the hit ratio loses %.3f, estimated %.3f", salt, capacities[i]>>10, capacities[j]>>10, real, est)
						worst = max(worst, math.Abs(est-real))
						if i == j+1 {
							sum, worstHalf, n = sum+math.Abs(est-real), max(worstHalf, math.Abs(est-real)), n+1
						}
					}
				}
			}
			mean := sum / float64(n)
			t.Logf("error to half the size: %.4f on average, %.3f at worst; between any two sizes, %.3f at worst", mean, worstHalf, worst)
			if mean > 0.01 || worstHalf > 0.03 || worst > 0.02 || (keys <= MaxFollowed && worst > 0.002) {
				t.Errorf("the estimated losses are off by %.4f on average and %.3f at worst to half the size, %.3f at worst between two sizes", mean, worstHalf, worst)
			}
		})
	}
}

// reuseOf is the gets by distance a pod counts from names' gets, 1,000 a
// second, following the keys salt samples; hit says which were found.
func reuseOf(names []string, sizes []int64, hit []bool, salt uint64) *Reuse {
	k := &keyStream{tracker: newReuseTrackerSalted(salt), counts: reuseCounts{started: 1000, keep: 300}}
	for i, key := range names {
		at := 1000 + int64(i/1000)
		if hit[i] {
			k.take(fmt.Sprintf("ts=%d.000001 gid=%d type=item_get key=%s status=found clsid=1 cfd=25 size=%d", at, i, key, sizes[i]))
			continue
		}
		k.take(fmt.Sprintf("ts=%d.000001 gid=%d type=item_get key=%s status=not_found clsid=0 cfd=25 size=0", at, i, key))
		k.take(fmt.Sprintf("ts=%d.000002 gid=%d type=item_get key=%s status=not_found clsid=0 cfd=25 size=0", at, i, key))
	}
	return k.counts.over(1000+int64(len(names)/1000), 300)
}
