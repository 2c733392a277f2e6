package autoscale

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
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

// The lines memcached skipped lower the coverage of their minute.
func TestSkippedLinesLowerTheCoverage(t *testing.T) {
	k := &keyStream{tracker: newReuseTracker(), counts: reuseCounts{started: 6000, keep: 60}}
	for i := range 90 {
		k.take(fmt.Sprintf("ts=6010.%06d gid=%d type=item_get key=k%d status=found clsid=1 cfd=25 size=10", i, i, i%3))
	}
	k.take("skipped=10")
	k.take("ts=6011.000000 gid=99 type=item_store key=k1 status=stored cmd=set ttl=0 clsid=1 cfd=25 size=5")
	r := k.counts.over(6030, 60)
	if r == nil || r.Coverage != 0.9 || r.Seconds != 30 {
		t.Fatalf("%+v: want 90 of 100 lines over 30 s", r)
	}
	if got := r.hitsWithin(1e9) * float64(r.Seconds); math.Abs(got-87) > 1e-9 {
		t.Fatalf("%v gets with a distance, want 87 (3 keys, each first read cold)", got)
	}
}

// The minutes counted are kept for the longest window asked, and a window
// with no get says so rather than nothing.
func TestTheMinutesCountedAreKeptForTheLongestWindowAsked(t *testing.T) {
	c := reuseCounts{started: 600, keep: 120}
	for at := int64(600); at < 1200; at += 60 {
		c.at(at).bins[3]++
	}
	if len(c.epochs) > 4 {
		t.Fatalf("%d minutes kept for a window of 2", len(c.epochs))
	}
	if r := c.over(1260, 60); r == nil || r.Seconds != 60 || len(r.PerSecond) != 0 {
		t.Fatalf("%+v: a minute and more with no get", r)
	}
	if r := (&reuseCounts{started: 600, keep: 60}).over(600, 60); r != nil {
		t.Fatalf("%+v: counted over no time", r)
	}
}

// A pod serves reuse distances only while its memcached logs the gets to
// it: a memcached that refuses the watch gives none, rather than a curve
// of no gets.
func TestNoReuseDistancesWithoutMemcachedsLog(t *testing.T) {
	for answer, want := range map[string]bool{"ERROR\r\n": false, "OK\r\n": true} {
		dial := func(ctx context.Context) (net.Conn, error) {
			client, server := net.Pipe()
			go func() {
				buf := make([]byte, 64)
				if _, err := server.Read(buf); err == nil {
					_, _ = io.WriteString(server, answer)
				}
				<-ctx.Done()
				server.Close()
			}()
			return client, nil
		}
		k := &keyStream{dial: dial, log: slog.New(slog.DiscardHandler)}
		k.reuse(5000, 60)
		time.Sleep(200 * time.Millisecond)
		if r := k.reuse(5010, 60); (r != nil) != want {
			t.Errorf("memcached answering %q to the watch: reuse distances %+v", answer, r)
		}
	}
}

// A follower stopped for idleness, ending after the next one began, does
// not unsay that memcached logs the gets to the next.
func TestAStoppedFollowerDoesNotSpeakForTheNext(t *testing.T) {
	k := &keyStream{gen: 2, following: true}
	k.follows(1, false)
	if !k.following {
		t.Fatal("the first follower's end stopped the second's distances")
	}
	k.follows(2, false)
	if k.following {
		t.Fatal("the second follower's end was not taken")
	}
}
