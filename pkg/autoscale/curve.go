package autoscale

import "math"

// Reuse distances are counted in bins: the first up to 1 KiB, then four
// to each doubling, the last taking every longer one.
const (
	reuseBins      = 1 + 4*40
	reuseFirstBin  = 1024.0
	binsPerDouble  = 4
	epochSeconds   = 60
	maxEpochsAhead = 2
)

// reuseBin is the bin of a reuse distance of d bytes.
func reuseBin(d float64) int {
	if d < reuseFirstBin {
		return 0
	}
	return min(1+int(binsPerDouble*math.Log2(d/reuseFirstBin)), reuseBins-1)
}

// binEdges are the distances bin i counts, from lo up to hi.
func binEdges(i int) (lo, hi float64) {
	if i == 0 {
		return 0, reuseFirstBin
	}
	return reuseFirstBin * math.Exp2(float64(i-1)/binsPerDouble), reuseFirstBin * math.Exp2(float64(i)/binsPerDouble)
}

// Reuse is one memcached's gets by reuse distance over the last Seconds:
// PerSecond[i] is the gets a second whose distance fell in bin i (the
// first up to 1 KiB, then four bins to each doubling; trailing empty bins
// are left out), estimated from the followed keys. A get of a key not
// read before in the window is in no bin: a miss at any size. Coverage is
// the share of memcached's log lines of gets the pod received (memcached
// skips lines a watcher does not read in time).
type Reuse struct {
	Seconds   int64     `json:"seconds"`
	Coverage  float64   `json:"coverage"`
	PerSecond []float64 `json:"perSecond"`
}

// MinCoverage is the least Coverage with which a Reuse tells anything: a
// get whose line was skipped is missing from its key's distances.
const MinCoverage = 0.9

// hitsWithin is the gets a second an LRU cache of c bytes would have
// served: those of a distance up to c, a bin's gets taken as spread
// evenly over the logarithm of its distances.
func (r *Reuse) hitsWithin(c float64) float64 {
	var hits float64
	for i, g := range r.PerSecond {
		lo, hi := binEdges(i)
		switch {
		case c >= hi:
			hits += g
		case c <= lo:
			return hits
		case i == 0:
			hits += g * c / hi
		default:
			hits += g * math.Log(c/lo) / math.Log(hi/lo)
		}
	}
	return hits
}

// add sums o into r: the gets of two memcacheds, over the shorter of
// their times and the lower of their coverages.
func (r *Reuse) add(o *Reuse) {
	r.Seconds, r.Coverage = min(r.Seconds, o.Seconds), min(r.Coverage, o.Coverage)
	for len(r.PerSecond) < len(o.PerSecond) {
		r.PerSecond = append(r.PerSecond, 0)
	}
	for i, g := range o.PerSecond {
		r.PerSecond[i] += g
	}
}

// reuseCounts are the gets of followed keys by reuse distance, and the
// log lines received and skipped, by minute of memcached's clock, from
// started, kept for the longest window asked.
type reuseCounts struct {
	started, last, keep int64
	epochs              map[int64]*epoch
}

type epoch struct {
	bins           [reuseBins]float64
	lines, skipped float64
	// sampled is the gets of followed keys, each weighing as many as it
	// stands for: over a window it comes to about lines, and their ratio
	// corrects the bins for a sample that drew more or fewer gets than its
	// share (SHARDS' adjustment).
	sampled float64
}

// at is the minute of at, made if new; minutes older than the longest
// window asked are dropped.
func (c *reuseCounts) at(at int64) *epoch {
	c.last = max(c.last, at)
	m := at / epochSeconds
	e := c.epochs[m]
	if e == nil {
		if c.epochs == nil {
			c.epochs = map[int64]*epoch{}
		}
		e = &epoch{}
		c.epochs[m] = e
		for old := range c.epochs {
			if old < m-c.keep/epochSeconds-1 || old > m+maxEpochsAhead {
				delete(c.epochs, old)
			}
		}
	}
	return e
}

// lastSeen is the time of the last line counted, or started.
func (c *reuseCounts) lastSeen() int64 { return max(c.last, c.started) }

// over is the gets by distance over the last seconds at now (at most the
// minutes kept; since started, when later), whole minutes back from the current one; nil
// at started.
func (c *reuseCounts) over(now, seconds int64) *Reuse {
	from := (now - min(seconds, c.keep)) / epochSeconds
	if start := c.started / epochSeconds; start > from {
		from = start
	}
	covered := now - max(from*epochSeconds, c.started)
	if covered <= 0 {
		return nil
	}
	var bins [reuseBins]float64
	var lines, skipped, sampled float64
	for m, e := range c.epochs {
		if m < from || m > now/epochSeconds {
			continue
		}
		for i, g := range e.bins {
			bins[i] += g
		}
		lines, skipped, sampled = lines+e.lines, skipped+e.skipped, sampled+e.sampled
	}
	adjust := 1.0
	if sampled > 0 {
		adjust = lines / sampled
	}
	r := &Reuse{Seconds: covered, Coverage: 1}
	if lines+skipped > 0 {
		r.Coverage = lines / (lines + skipped)
	}
	last := 0
	for i, g := range bins {
		if g > 0 {
			last = i + 1
		}
	}
	r.PerSecond = make([]float64, last)
	for i := range last {
		r.PerSecond[i] = adjust * bins[i] / float64(covered)
	}
	return r
}
