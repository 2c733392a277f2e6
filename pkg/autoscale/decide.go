package autoscale

import (
	"fmt"
	"time"

	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// The steps Decide names (AutoscalingStatus.next).
const (
	Hold      = "Hold"
	ScaleUp   = "ScaleUp"
	ScaleDown = "ScaleDown"
	Blocked   = "Blocked"
)

// Headroom is the share of one slot fewer's memory the working set may
// fill for a slot to be removed: the rest is for what the working set
// does not count (items' overhead, a burst), so that the hit ratio the
// smaller size gives is the one now.
const Headroom = 0.8

// Policy is a Memcached's spec.autoscaling, with its defaults.
type Policy struct {
	Min, Max               int32
	ReadEvictionsPerMinute float64
	// HitRatio is 0 when not set.
	HitRatio float64
	// MaxLoss is the most hit ratio (a fraction) one slot fewer may lose,
	// as estimated from the gets' reuse distances, for a slot to be removed.
	MaxLoss  float64
	Up, Down time.Duration
}

// PolicyOf is the autoscaling policy a asks for, with its defaults.
func PolicyOf(a *cachev1alpha1.AutoscalingSpec) Policy {
	return Policy{
		Min:                    a.MinSize,
		Max:                    a.MaxSize,
		ReadEvictionsPerMinute: float64(ptr.Deref(a.ReadEvictionsPerMinute, 60)),
		HitRatio:               float64(ptr.Deref(a.HitRatioPercent, 0)) / 100,
		MaxLoss:                float64(ptr.Deref(a.MaxHitRatioLossPermille, 10)) / 1000,
		Up:                     time.Duration(ptr.Deref(a.ScaleUpSeconds, 60)) * time.Second,
		Down:                   time.Duration(ptr.Deref(a.ScaleDownSeconds, 600)) * time.Second,
	}
}

// Decision is a step and why: To is the size to take now (the size
// itself when Next is not to be taken yet). Cause names the rule that
// decided, in a few words that do not change with the readings: a status
// that tells the decision changes when its cause does.
type Decision struct {
	Next   string
	Reason string
	To     int32
	Cause  string
}

// Step tells whether the decision changes the size now.
func (d Decision) Step(size int32) bool { return d.To != size }

// Decide is the step a Memcached of size, whose slots said samples (the
// oldest first, each since the size was last reached), takes at now: a
// slot added once a signal has stayed over its target for p.Up, removed
// once the evictions have stayed under a quarter of theirs for p.Down and
// the working set fits one slot fewer (Headroom), one at a time, never
// past the bounds. A size outside the bounds is brought in by one slot.
func Decide(p Policy, size int32, samples []Sample, now time.Time) Decision {
	switch {
	case size < p.Min:
		return Decision{ScaleUp, fmt.Sprintf("size %d is under minSize %d", size, p.Min), size + 1, "under minSize"}
	case size > p.Max:
		return Decision{ScaleDown, fmt.Sprintf("size %d is over maxSize %d", size, p.Max), size - 1, "over maxSize"}
	}
	whole := wholeSamples(samples, size)
	if len(whole) == 0 {
		return Decision{Hold, fmt.Sprintf("no reading of all %d slots yet", size), size, "not all slots read"}
	}
	last := whole[len(whole)-1]
	if why, over := p.over(last); over {
		if !lasted(whole, now, p.Up, func(s Sample) bool { _, o := p.over(s); return o }) {
			return Decision{ScaleUp, why + fmt.Sprintf("; a slot is added once this lasts %s", p.Up), size, "over target, window running"}
		}
		if size >= p.Max {
			return Decision{Blocked, why + fmt.Sprintf(" for %s, but the size is maxSize %d", p.Up, p.Max), size, "over target at maxSize"}
		}
		return Decision{ScaleUp, why + fmt.Sprintf(" for %s", p.Up), size + 1, "over target"}
	}
	why, under := p.under(last, size)
	switch {
	case !under || size <= p.Min:
		return Decision{Hold, p.readings(last, size), size, "steady"}
	case !lasted(whole, now, p.Down, func(s Sample) bool { _, u := p.under(s, size); return u }):
		return Decision{ScaleDown, why + fmt.Sprintf("; a slot is removed once this lasts %s", p.Down), size, "under target, window running"}
	}
	return Decision{ScaleDown, why + fmt.Sprintf(" for %s", p.Down), size - 1, "under target"}
}

// wholeSamples are the samples with a rate for each of size slots.
func wholeSamples(samples []Sample, size int32) []Sample {
	var out []Sample
	for _, s := range samples {
		if s.Slots == int(size) {
			out = append(out, s)
		}
	}
	return out
}

// lasted tells whether every sample of the last d says ok, and the
// samples reach back d.
func lasted(samples []Sample, now time.Time, d time.Duration, ok func(Sample) bool) bool {
	if now.Sub(samples[0].At) < d {
		return false
	}
	for _, s := range samples {
		if now.Sub(s.At) <= d && !ok(s) {
			return false
		}
	}
	return true
}

// over tells whether s asks for one slot more, and why.
func (p Policy) over(s Sample) (string, bool) {
	if s.ReadEvictionsPerMinute > p.ReadEvictionsPerMinute {
		return fmt.Sprintf("%.0f evictions of read items a minute per slot, over the target of %.0f", s.ReadEvictionsPerMinute, p.ReadEvictionsPerMinute), true
	}
	if p.HitRatio > 0 && s.HitRatio < p.HitRatio && s.ReadEvictionsPerMinute > 0 {
		return fmt.Sprintf("hit ratio %.1f%%, under the target of %.0f%%, with %.1f evictions of read items a minute per slot", 100*s.HitRatio, 100*p.HitRatio, s.ReadEvictionsPerMinute), true
	}
	return "", false
}

// under tells whether s allows one slot fewer than size, and why: the
// evictions of read items under a quarter of their target, the hit ratio
// at its target, the working set within Headroom of size-1 slots, and the
// hit ratio one slot fewer loses, as estimated, within MaxLoss (when the
// reuse distances are not counted, the working set alone decides; while
// they are counted over less than the window, nothing does).
func (p Policy) under(s Sample, size int32) (string, bool) {
	fewer := float64(size-1) * float64(s.SlotBytes) * Headroom
	e := estimateOf(s, size, p.Down)
	switch {
	case e.pending || (e.known && e.lost > p.MaxLoss):
		return "", false
	case s.ReadEvictionsPerMinute >= p.ReadEvictionsPerMinute/4:
		return "", false
	case p.HitRatio > 0 && s.HitRatio < p.HitRatio:
		return "", false
	case s.WorkingSetBytes < 0 || float64(s.WorkingSetBytes) > fewer:
		return "", false
	}
	why := fmt.Sprintf("%.1f evictions of read items a minute per slot, and the items read in the last %s (%s) fit %s (%s with %.0f%% headroom)",
		s.ReadEvictionsPerMinute, p.Down, mib(s.WorkingSetBytes), slots(size-1), mib(int64(fewer)), 100*(1-Headroom))
	if !e.known {
		return why + "; " + e.says(size), true
	}
	return why + fmt.Sprintf("; %s would lose an estimated %.1f points of hit ratio (at most %.1f)", slots(size-1), 100*e.lost, 100*p.MaxLoss), true
}

// readings says s, a sample of size slots, as a reason to hold.
func (p Policy) readings(s Sample, size int32) string {
	ws := "unknown"
	if s.WorkingSetBytes >= 0 {
		ws = mib(s.WorkingSetBytes)
	}
	return fmt.Sprintf("%.1f evictions of read items a minute per slot (target %.0f), hit ratio %.1f%% at %.0f gets/s, working set %s of %s a slot; %s",
		s.ReadEvictionsPerMinute, p.ReadEvictionsPerMinute, 100*s.HitRatio, s.GetsPerSecond, ws, mib(s.SlotBytes), estimateOf(s, size, p.Down).says(size))
}

func slots(n int32) string {
	if n == 1 {
		return "1 slot"
	}
	return fmt.Sprintf("%d slots", n)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
