package autoscale

import (
	"math"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

var t0 = time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)

func policy() Policy {
	return Policy{Min: 1, Max: 3, ReadEvictionsPerMinute: 60, Up: time.Minute, Down: 10 * time.Minute}
}

// every is a sample each 30 s from t0 to the end, as the operator polls.
func every(end time.Duration, s Sample) []Sample {
	var out []Sample
	for at := time.Duration(0); at <= end; at += 30 * time.Second {
		s.At = t0.Add(at)
		out = append(out, s)
	}
	return out
}

func TestASlotIsAddedOnceEvictionsOfReadItemsLastTheirWindow(t *testing.T) {
	evicting := Sample{Slots: 1, ReadEvictionsPerMinute: 600, HitRatio: 0.5, WorkingSetBytes: -1, SlotBytes: 64 << 20}
	p := policy()
	d := Decide(p, 1, every(30*time.Second, evicting), t0.Add(30*time.Second))
	if d.Next != ScaleUp || d.Step(1) || !strings.Contains(d.Reason, "600 evictions of read items") {
		t.Fatalf("within the window: %+v, want ScaleUp pending", d)
	}
	d = Decide(p, 1, every(time.Minute, evicting), t0.Add(time.Minute))
	if d.Next != ScaleUp || d.To != 2 {
		t.Fatalf("after the window: %+v, want a step to 2", d)
	}
	d = Decide(p, 3, every(time.Minute, Sample{Slots: 3, ReadEvictionsPerMinute: 600, WorkingSetBytes: -1}), t0.Add(time.Minute))
	if d.Next != Blocked || d.Step(3) {
		t.Fatalf("at maxSize: %+v, want Blocked", d)
	}
}

func TestOneQuietSampleRestartsTheWindow(t *testing.T) {
	samples := every(time.Minute, Sample{Slots: 1, ReadEvictionsPerMinute: 600, WorkingSetBytes: -1})
	samples[1].ReadEvictionsPerMinute = 10
	if d := Decide(policy(), 1, samples, t0.Add(time.Minute)); d.Step(1) {
		t.Fatalf("%+v: stepped though the evictions stopped within the window", d)
	}
}

func TestSlotsNotAllReadDecideNothing(t *testing.T) {
	samples := every(5*time.Minute, Sample{Slots: 1, ReadEvictionsPerMinute: 600, WorkingSetBytes: -1})
	if d := Decide(policy(), 2, samples, t0.Add(5*time.Minute)); d.Next != Hold || d.Step(2) {
		t.Fatalf("%+v: decided on one slot of two", d)
	}
}

func TestALowHitRatioAddsASlotOnlyWhileReadItemsAreEvicted(t *testing.T) {
	p := policy()
	p.HitRatio = 0.9
	cold := Sample{Slots: 1, ReadEvictionsPerMinute: 0, HitRatio: 0.5, WorkingSetBytes: -1}
	if d := Decide(p, 1, every(2*time.Minute, cold), t0.Add(2*time.Minute)); d.Step(1) {
		t.Fatalf("%+v: misses without evictions are keys never stored", d)
	}
	cold.ReadEvictionsPerMinute = 5
	if d := Decide(p, 1, every(2*time.Minute, cold), t0.Add(2*time.Minute)); d.To != 2 || !strings.Contains(d.Reason, "hit ratio 50.0%") {
		t.Fatalf("%+v: want a step on the hit ratio", d)
	}
}

func TestASlotIsRemovedOnlyWhenTheWorkingSetFitsOneFewer(t *testing.T) {
	p := policy()
	quiet := Sample{Slots: 3, ReadEvictionsPerMinute: 0, HitRatio: 0.99, SlotBytes: 100 << 20}
	quiet.WorkingSetBytes = 161 << 20 // over 80% of 2 slots' 200 MiB
	if d := Decide(p, 3, every(20*time.Minute, quiet), t0.Add(20*time.Minute)); d.Next != Hold || d.Step(3) {
		t.Fatalf("%+v: removed a slot the working set needs", d)
	}
	quiet.WorkingSetBytes = 159 << 20
	d := Decide(p, 3, every(9*time.Minute, quiet), t0.Add(9*time.Minute))
	if d.Next != ScaleDown || d.Step(3) {
		t.Fatalf("within the window: %+v, want ScaleDown pending", d)
	}
	d = Decide(p, 3, every(10*time.Minute, quiet), t0.Add(10*time.Minute))
	if d.To != 2 || !strings.Contains(d.Reason, "fit 2 slots") {
		t.Fatalf("after the window: %+v, want a step to 2", d)
	}
	if d := Decide(p, 1, every(20*time.Minute, Sample{Slots: 1, SlotBytes: 1 << 20}), t0.Add(20*time.Minute)); d.Step(1) {
		t.Fatalf("%+v: went under minSize", d)
	}
}

func TestEvictionsOverAQuarterOfTheTargetKeepTheSlots(t *testing.T) {
	s := Sample{Slots: 2, ReadEvictionsPerMinute: 15, HitRatio: 1, SlotBytes: 100 << 20}
	if d := Decide(policy(), 2, every(20*time.Minute, s), t0.Add(20*time.Minute)); d.Step(2) {
		t.Fatalf("%+v: removed a slot while read items are evicted", d)
	}
	s.WorkingSetBytes = -1
	s.ReadEvictionsPerMinute = 0
	if d := Decide(policy(), 2, every(20*time.Minute, s), t0.Add(20*time.Minute)); d.Step(2) {
		t.Fatalf("%+v: removed a slot with the working set unknown", d)
	}
}

func TestASizeOutsideTheBoundsIsBroughtInOneSlotAtATime(t *testing.T) {
	if d := Decide(policy(), 5, nil, t0); d.To != 4 {
		t.Fatalf("over maxSize: %+v", d)
	}
	p := policy()
	p.Min = 2
	if d := Decide(p, 0, nil, t0); d.To != 1 {
		t.Fatalf("under minSize: %+v", d)
	}
}

// reuseAt is a Reuse over seconds with gets a second at a distance of
// each of the keys' bytes.
func reuseAt(seconds int64, gets map[float64]float64) *Reuse {
	r := &Reuse{Seconds: seconds, Coverage: 1, PerSecond: make([]float64, reuseBins)}
	for d, g := range gets {
		r.PerSecond[reuseBin(d)] += g
	}
	return r
}

func TestASlotIsKeptWhenTheEstimateSaysOneFewerLosesTooMuch(t *testing.T) {
	p := policy()
	p.MaxLoss = 0.01
	// 3 slots of 100 MiB serve distances up to 80 MiB (Headroom); 2 slots,
	// in the keys of one slot now, up to 53.3 MiB: the 5 of 100 gets a
	// second at 70 MiB are lost, those at 10 MiB are not.
	quiet := Sample{Slots: 3, HitRatio: 0.95, GetsPerSecond: 100, WorkingSetBytes: 10 << 20, SlotBytes: 100 << 20,
		Reuse: reuseAt(600, map[float64]float64{10 << 20: 90, 70 << 20: 5})}
	d := Decide(p, 3, every(20*time.Minute, quiet), t0.Add(20*time.Minute))
	if d.Step(3) || d.Next != Hold || !strings.Contains(d.Reason, "estimated hit ratio at 2 slots 90.0%, at 4 slots 95.0%") {
		t.Fatalf("%+v: want the slot kept, the estimate said", d)
	}
	p.MaxLoss = 0.06
	d = Decide(p, 3, every(20*time.Minute, quiet), t0.Add(20*time.Minute))
	if d.To != 2 || !strings.Contains(d.Reason, "2 slots would lose an estimated 5.0 points of hit ratio (at most 6.0)") {
		t.Fatalf("%+v: want a step to 2 within the bound", d)
	}
	quiet.Reuse.Seconds = 599
	if d := Decide(p, 3, every(20*time.Minute, quiet), t0.Add(20*time.Minute)); d.Step(3) {
		t.Fatalf("%+v: removed a slot on distances counted over less than the window", d)
	}
	quiet.Reuse = reuseAt(600, map[float64]float64{70 << 20: 50})
	quiet.Reuse.Coverage = 0.5
	d = Decide(p, 3, every(20*time.Minute, quiet), t0.Add(20*time.Minute))
	if d.To != 2 || !strings.Contains(d.Reason, "memcached logged only 50% of the gets") {
		t.Fatalf("%+v: with half of the gets logged, the working set alone decides", d)
	}
}

func TestTheEstimateSaysWhatOneSlotMoreWouldServe(t *testing.T) {
	// 1 slot of 100 MiB serves up to 80 MiB; 2 slots, up to 160 MiB: the
	// 10 gets a second at 120 MiB are gained.
	s := Sample{Slots: 1, HitRatio: 0.8, GetsPerSecond: 100, SlotBytes: 100 << 20,
		Reuse: reuseAt(600, map[float64]float64{10 << 20: 80, 120 << 20: 10, 1 << 40: 10})}
	e := estimateOf(s, 1, 10*time.Minute)
	if !e.known || e.lost != 0 || math.Abs(e.more-0.9) > 1e-9 || e.says(1) != "estimated hit ratio at 2 slots 90.0%" {
		t.Fatalf("%+v %q: want 90%% at 2 slots", e, e.says(1))
	}
	s.GetsPerSecond = 0
	if e := estimateOf(s, 1, 10*time.Minute); e.more != s.HitRatio {
		t.Fatalf("%+v: no get gains nothing", e)
	}
}

func TestThePolicysDefaultsAreTheCRDs(t *testing.T) {
	p := PolicyOf(&cachev1alpha1.AutoscalingSpec{MinSize: 1, MaxSize: 4})
	want := Policy{Min: 1, Max: 4, ReadEvictionsPerMinute: 60, MaxLoss: 0.01, Up: time.Minute, Down: 10 * time.Minute}
	if p != want {
		t.Fatalf("%+v, want %+v", p, want)
	}
	p = PolicyOf(&cachev1alpha1.AutoscalingSpec{MinSize: 1, MaxSize: 4, HitRatioPercent: ptr.To[int32](90), MaxHitRatioLossPermille: ptr.To[int32](0)})
	if p.HitRatio != 0.9 || p.MaxLoss != 0 {
		t.Fatalf("%+v: want the hit ratio and a loss of none as set", p)
	}
}
