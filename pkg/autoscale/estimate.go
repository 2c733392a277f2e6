package autoscale

import (
	"fmt"
	"time"
)

// estimate is the hit ratio a sample's slots would give with one slot
// fewer and one more, from their gets' reuse distances: an LRU cache of
// n slots serves the gets whose distance, counted in the slot's own key
// stream, is at most Headroom of a slot's memory; with n-1 slots each
// slot takes n/(n-1) of the keys, and a distance grows as much.
type estimate struct {
	// known is false when the sample has no estimate to tell; why says so,
	// and pending is true when it has one, not yet over the whole window.
	known, pending bool
	why            string
	fewer, more    float64
	lost, gained   float64
}

// estimateOf is what s, a sample of size slots, tells of the hit ratio at
// one slot fewer and one more, its reuse distances counted over at least
// window.
func estimateOf(s Sample, size int32, window time.Duration) estimate {
	r := s.Reuse
	switch {
	case r == nil:
		return estimate{why: "no reuse distances counted"}
	case r.Coverage < MinCoverage:
		return estimate{why: fmt.Sprintf("memcached logged only %.0f%% of the gets for the pods to read (under %.0f%%)", 100*r.Coverage, 100*MinCoverage)}
	case time.Duration(r.Seconds)*time.Second < window:
		return estimate{pending: true, why: fmt.Sprintf("the reuse distances are counted over %ds of the %s window", r.Seconds, window)}
	}
	e := estimate{known: true, fewer: s.HitRatio, more: s.HitRatio}
	if s.GetsPerSecond <= 0 || size < 1 {
		return e
	}
	c := float64(s.SlotBytes) * Headroom
	now := r.hitsWithin(c)
	if size > 1 {
		e.lost = max(now-r.hitsWithin(c*float64(size-1)/float64(size)), 0) / s.GetsPerSecond
	}
	e.gained = max(r.hitsWithin(c*float64(size+1)/float64(size))-now, 0) / s.GetsPerSecond
	e.fewer, e.more = max(s.HitRatio-e.lost, 0), min(s.HitRatio+e.gained, 1)
	return e
}

// says is the estimate as a reason's words, for size slots.
func (e estimate) says(size int32) string {
	if !e.known {
		return "no estimate of the hit ratio at another size (" + e.why + ")"
	}
	if size <= 1 {
		return fmt.Sprintf("estimated hit ratio at %s %.1f%%", slots(size+1), 100*e.more)
	}
	return fmt.Sprintf("estimated hit ratio at %s %.1f%%, at %s %.1f%%", slots(size-1), 100*e.fewer, slots(size+1), 100*e.more)
}
