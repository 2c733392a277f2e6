package autoscale

import (
	"time"
)

// Sample is what a Memcached's slots said at one time, summed over the
// slots read.
type Sample struct {
	At time.Time
	// Slots is the number of slots whose rates the sample has: those read
	// now and at the reading before, in the same memcached.
	Slots int
	// ReadEvictionsPerMinute is per slot.
	ReadEvictionsPerMinute float64
	// GetsPerSecond and Hits are over every slot read; HitRatio is NaN-free:
	// 1 when there was no get.
	GetsPerSecond, HitRatio float64
	// WorkingSetBytes is the sum of the slots' working sets, -1 when one is
	// unknown; SlotBytes is the item memory of the smallest slot.
	WorkingSetBytes, SlotBytes int64
	// Reuse is the sum of the slots' gets by reuse distance, nil when one
	// slot has none.
	Reuse *Reuse
}

// reading is one slot's Signals, and the pod it came from.
type reading struct {
	pod string
	s   Signals
}

// History is what a Memcached's slots said over the last window: the
// samples, and each slot's last reading, from which the next rates are
// taken.
type History struct {
	Samples []Sample
	last    map[string]reading
}

// Add takes the readings of one poll (by slot; pod names its pod, so that
// a slot's new memcached is not subtracted from its old one) and adds the
// sample they make; false when no slot has a rate yet.
func (h *History) Add(at time.Time, pods map[string]string, read map[string]Signals) (Sample, bool) {
	if h.last == nil {
		h.last = map[string]reading{}
	}
	sm := Sample{At: at, WorkingSetBytes: 0}
	var evictions, gets, hits float64
	sm.Reuse = sumReuse(read)
	for slot, now := range read {
		before, ok := h.last[slot]
		h.last[slot] = reading{pod: pods[slot], s: now}
		if sm.SlotBytes == 0 || now.LimitMaxbytes < sm.SlotBytes {
			sm.SlotBytes = now.LimitMaxbytes
		}
		switch {
		case sm.WorkingSetBytes < 0:
		case now.WorkingSetBytes < 0:
			sm.WorkingSetBytes = -1
		default:
			sm.WorkingSetBytes += now.WorkingSetBytes
		}
		elapsed := float64(now.Time - before.s.Time)
		if !ok || before.pod != pods[slot] || now.Uptime < before.s.Uptime || elapsed <= 0 {
			continue
		}
		sm.Slots++
		evictions += float64(now.readEvictions()-min(before.s.readEvictions(), now.readEvictions())) / elapsed * 60
		g := float64(now.GetHits+now.GetMisses) - float64(before.s.GetHits+before.s.GetMisses)
		gets += max(g, 0) / elapsed
		hits += max(float64(now.GetHits)-float64(before.s.GetHits), 0) / elapsed
	}
	for slot := range h.last {
		if _, ok := read[slot]; !ok {
			delete(h.last, slot)
		}
	}
	if sm.Slots == 0 {
		return Sample{}, false
	}
	sm.ReadEvictionsPerMinute = evictions / float64(sm.Slots)
	sm.GetsPerSecond, sm.HitRatio = gets, 1
	if gets > 0 {
		sm.HitRatio = hits / gets
	}
	h.Samples = append(h.Samples, sm)
	return sm, true
}

// sumReuse is the sum of the slots' gets by reuse distance, nil when one
// slot has none.
func sumReuse(read map[string]Signals) *Reuse {
	var sum *Reuse
	for _, s := range read {
		switch {
		case s.Reuse == nil:
			return nil
		case sum == nil:
			sum = &Reuse{Seconds: s.Reuse.Seconds, Coverage: s.Reuse.Coverage}
		}
		sum.add(s.Reuse)
	}
	return sum
}

// Forget drops the samples before t: after a step, or while the size is
// not reached, what the slots said says nothing of the size now.
func (h *History) Forget(t time.Time) {
	i := 0
	for i < len(h.Samples) && h.Samples[i].At.Before(t) {
		i++
	}
	h.Samples = h.Samples[i:]
}
