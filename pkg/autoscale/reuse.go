package autoscale

import (
	"container/heap"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"
)

// MaxFollowed is the most keys a pod follows to measure reuse distances
// (SHARDS' fixed-size sampling: a key is followed while its hash is under
// a threshold, lowered as more keys than this would be followed). With a
// sample of this size, SHARDS' authors measured a mean absolute error
// of the miss ratio of about 0.01 over hundreds of production traces.
const MaxFollowed = 8192

// itemOverhead is what memcached 1.6 stores with each item besides its
// key and value: its header with the CAS, and the value's "\r\n".
const itemOverhead = 58

// reuseTracker measures the reuse distance of the gets of a sample of
// memcached's keys (SHARDS, Waldspurger et al., FAST 2015): for each get
// of a followed key, the bytes of the distinct followed keys read since
// its last get, scaled by the sampling rate. An LRU cache of c bytes
// serves the gets whose distance, with the item's own bytes, is at most
// c, so the distances of a window tell the hit ratio at every size.
type reuseTracker struct {
	salt      uint64
	threshold uint64
	keys      map[string]*followed
	byHash    hashHeap
	tree      fenwick
	next      int
	meanSize  float64
	sized     float64
}

// followed is a followed key: its hash, its position in the order of
// last gets, and its item's bytes.
type followed struct {
	key   string
	hash  uint64
	pos   int
	bytes int64
}

func newReuseTracker() *reuseTracker { return newReuseTrackerSalted(rand.Uint64()) }

// newReuseTrackerSalted follows the keys that salt's hash samples.
func newReuseTrackerSalted(salt uint64) *reuseTracker {
	return &reuseTracker{salt: salt, threshold: math.MaxUint64, keys: map[string]*followed{}, tree: newFenwick(4 * MaxFollowed)}
}

// rate is the share of keys followed.
func (r *reuseTracker) rate() float64 { return float64(r.threshold) / math.MaxUint64 }

// get takes a get of key whose value is size bytes (found) or not
// stored: it returns the get's distance in bytes, scaled, and the weight
// one get of a followed key stands for; followed is false when the key is
// not followed, and cold when it was not read before.
func (r *reuseTracker) get(key string, size int64, found bool) (distance, weight float64, followed, cold bool) {
	h := r.hash(key)
	if h >= r.threshold {
		return 0, 0, false, false
	}
	rate := r.rate()
	bytes := r.itemBytes(key, size, found)
	f, seen := r.keys[key]
	if seen {
		distance = float64(r.tree.after(f.pos))/rate + float64(bytes)
		// Out of the order until placed again: a renumbering on the way
		// must not count it twice.
		r.tree.add(f.pos, -f.bytes)
		f.pos = -1
	} else {
		f = r.follow(key, h)
		if f == nil {
			return 0, 0, false, false
		}
	}
	if found || !seen {
		f.bytes = bytes
	}
	r.place(f)
	return distance, 1 / rate, true, !seen
}

// hash is key's salted hash: FNV-1a, its bits then mixed (SplitMix64's
// finalizer) so that its high bits, which the threshold compares, are
// spread as evenly as its low ones.
func (r *reuseTracker) hash(key string) uint64 {
	f := fnv.New64a()
	_, _ = f.Write([]byte(key))
	h := f.Sum64() ^ r.salt
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9
	h = (h ^ (h >> 27)) * 0x94d049bb133111eb
	return h ^ (h >> 31)
}

// itemBytes is the bytes a get's item takes: its own when found, else the
// mean of those found (a miss is stored next, with a cache in front of a
// database).
func (r *reuseTracker) itemBytes(key string, size int64, found bool) int64 {
	if found {
		b := int64(len(key)) + size + itemOverhead
		r.sized++
		r.meanSize += (float64(b) - r.meanSize) / r.sized
		return b
	}
	return max(int64(r.meanSize), int64(len(key))+itemOverhead)
}

// follow starts following key, whose hash is h, lowering the threshold
// past the highest hash followed when that makes too many; nil when key's
// own hash is the one dropped.
func (r *reuseTracker) follow(key string, h uint64) *followed {
	f := &followed{key: key, hash: h, pos: -1}
	heap.Push(&r.byHash, f)
	r.keys[key] = f
	if len(r.keys) <= MaxFollowed {
		return f
	}
	top := heap.Pop(&r.byHash).(*followed)
	delete(r.keys, top.key)
	if top.pos >= 0 {
		r.tree.add(top.pos, -top.bytes)
	}
	r.threshold = top.hash
	if top == f {
		return nil
	}
	return f
}

// place puts f last in the order of gets, renumbering every followed key
// when the positions run out.
func (r *reuseTracker) place(f *followed) {
	if r.next == r.tree.size() {
		r.compact()
	}
	f.pos = r.next
	r.next++
	r.tree.add(f.pos, f.bytes)
}

// compact renumbers the followed keys from 0, in the order of their last
// gets.
func (r *reuseTracker) compact() {
	placed := make([]*followed, 0, len(r.keys))
	for _, f := range r.keys {
		if f.pos >= 0 {
			placed = append(placed, f)
		}
	}
	sort.Slice(placed, func(i, j int) bool { return placed[i].pos < placed[j].pos })
	r.tree = newFenwick(r.tree.size())
	for i, f := range placed {
		f.pos = i
		r.tree.add(i, f.bytes)
	}
	r.next = len(placed)
}

// hashHeap is the followed keys, the highest hash first.
type hashHeap []*followed

func (h hashHeap) Len() int           { return len(h) }
func (h hashHeap) Less(i, j int) bool { return h[i].hash > h[j].hash }
func (h hashHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *hashHeap) Push(x any)        { *h = append(*h, x.(*followed)) }
func (h *hashHeap) Pop() any {
	old := *h
	f := old[len(old)-1]
	*h = old[:len(old)-1]
	return f
}

// fenwick sums bytes by position (a binary indexed tree).
type fenwick []int64

func newFenwick(n int) fenwick { return make(fenwick, n+1) }

func (t fenwick) size() int { return len(t) - 1 }

func (t fenwick) add(pos int, v int64) {
	for i := pos + 1; i < len(t); i += i & -i {
		t[i] += v
	}
}

// upTo is the sum of the positions 0 to pos.
func (t fenwick) upTo(pos int) int64 {
	var s int64
	for i := pos + 1; i > 0; i -= i & -i {
		s += t[i]
	}
	return s
}

// after is the sum of the positions after pos.
func (t fenwick) after(pos int) int64 { return t.upTo(t.size()-1) - t.upTo(pos) }
