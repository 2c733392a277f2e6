package autoscale

import (
	"fmt"
	"testing"
	"time"
)

func TestRatesAreTakenFromTheSameMemcachedOnly(t *testing.T) {
	var h History
	pods := map[string]string{"0": "uid-a", "1": "uid-b"}
	first := map[string]Signals{
		"0": {Time: 100, Uptime: 50, Evictions: 100, EvictedUnfetched: 40, GetHits: 10, GetMisses: 10, LimitMaxbytes: 64 << 20, WorkingSetBytes: 1 << 20},
		"1": {Time: 100, Uptime: 50, LimitMaxbytes: 32 << 20, WorkingSetBytes: 2 << 20},
	}
	if _, ok := h.Add(t0, pods, first); ok {
		t.Fatal("a first reading has no rate")
	}
	second := map[string]Signals{
		"0": {Time: 160, Uptime: 110, Evictions: 220, EvictedUnfetched: 40, GetHits: 70, GetMisses: 70, LimitMaxbytes: 64 << 20, WorkingSetBytes: 1 << 20},
		"1": {Time: 160, Uptime: 110, Evictions: 0, LimitMaxbytes: 32 << 20, WorkingSetBytes: 2 << 20},
	}
	s, ok := h.Add(t0.Add(time.Minute), pods, second)
	if !ok || s.Slots != 2 || s.ReadEvictionsPerMinute != 60 || s.GetsPerSecond != 2 || s.HitRatio != 0.5 {
		t.Fatalf("sample %+v: want 2 slots, (120+0)/2 read evictions a minute, 2 gets/s, hit ratio 0.5", s)
	}
	if s.WorkingSetBytes != 3<<20 || s.SlotBytes != 32<<20 {
		t.Fatalf("sample %+v: want the working sets summed and the smallest slot", s)
	}
	// Slot 0's pod replaced, slot 1's memcached restarted: no rate.
	pods["0"] = "uid-c"
	third := map[string]Signals{
		"0": {Time: 220, Uptime: 5, Evictions: 1},
		"1": {Time: 220, Uptime: 2, Evictions: 1, WorkingSetBytes: -1},
	}
	if s, ok := h.Add(t0.Add(2*time.Minute), pods, third); ok {
		t.Fatalf("sample %+v from new memcacheds", s)
	}
	if len(h.Samples) != 1 {
		t.Fatalf("%d samples, want 1", len(h.Samples))
	}
	h.Forget(t0.Add(2 * time.Minute))
	if len(h.Samples) != 0 {
		t.Fatal("Forget kept a sample")
	}
}

func TestStatsAreRead(t *testing.T) {
	s, err := FromStats(map[string]string{"time": "9", "uptime": "3", "bytes": "10", "limit_maxbytes": "67108864",
		"get_hits": "1", "get_misses": "2", "evictions": "5", "evicted_unfetched": "7"})
	if err != nil || s.readEvictions() != 0 || s.WorkingSetBytes != -1 || s.LimitMaxbytes != 64<<20 {
		t.Fatalf("%+v %v", s, err)
	}
	if _, err := FromStats(map[string]string{"time": "9"}); err == nil {
		t.Fatal("stats without uptime read")
	}
}

// The slots' gets by distance are summed, over the shorter time and the
// lower coverage, and unknown when one slot has none.
func TestTheSlotsReuseDistancesAreSummed(t *testing.T) {
	a := &Reuse{Seconds: 600, Coverage: 1, PerSecond: []float64{1, 2}}
	b := &Reuse{Seconds: 300, Coverage: 0.95, PerSecond: []float64{0, 1, 4}}
	sum := sumReuse(map[string]Signals{"0": {Reuse: a}, "1": {Reuse: b}})
	if sum == nil || sum.Seconds != 300 || sum.Coverage != 0.95 || fmt.Sprint(sum.PerSecond) != "[1 3 4]" {
		t.Fatalf("%+v", sum)
	}
	if a.Seconds != 600 || fmt.Sprint(a.PerSecond) != "[1 2]" {
		t.Fatalf("%+v: a slot's own counts changed", a)
	}
	if sum := sumReuse(map[string]Signals{"0": {Reuse: a}, "1": {}}); sum != nil {
		t.Fatalf("%+v: summed without one slot's", sum)
	}
}
