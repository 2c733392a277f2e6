package autoscale

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Each distance falls in the bin whose edges hold it, the first bin up
// to 1 KiB, the last taking every longer one.
func TestADistanceFallsInTheBinWhoseEdgesHoldIt(t *testing.T) {
	for _, d := range []float64{0, 1, 1023, 1024, 1025, 1500, 3177, 1 << 20, 70 << 20, 1 << 40} {
		i := reuseBin(d)
		lo, hi := binEdges(i)
		if d < lo || d >= hi {
			t.Errorf("%.0f bytes in bin %d, which holds %.0f to %.0f", d, i, lo, hi)
		}
	}
	if i := reuseBin(1e30); i != reuseBins-1 {
		t.Errorf("a distance past every bin is in bin %d, want the last, %d", i, reuseBins-1)
	}
	for i := 1; i < reuseBins; i++ {
		_, hi := binEdges(i - 1)
		if lo, _ := binEdges(i); lo != hi {
			t.Fatalf("bin %d starts at %.1f, the bin before ends at %.1f", i, lo, hi)
		}
	}
}

// A bin's gets are taken as spread evenly over the logarithm of its
// distances (the first bin's over its distances).
func TestTheHitsWithinASizeTakeABinsShare(t *testing.T) {
	r := &Reuse{PerSecond: make([]float64, 6)}
	r.PerSecond[0], r.PerSecond[5] = 4, 10
	lo, hi := binEdges(5)
	for _, tt := range []struct {
		c, want float64
	}{{512, 2}, {lo, 4}, {math.Sqrt(lo * hi), 9}, {hi, 14}, {1e12, 14}} {
		if got := r.hitsWithin(tt.c); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("hits within %.0f bytes: %v, want %v", tt.c, got, tt.want)
		}
	}
}

// An item is its key, value and memcached's overhead; a miss is taken at
// the mean of the items found, and at least its key and overhead.
func TestAnItemsBytesAreKeyValueAndOverhead(t *testing.T) {
	r := newReuseTrackerSalted(0)
	if b := r.itemBytes("abc", 0, false); b != 3+itemOverhead {
		t.Fatalf("a miss before any item found: %d bytes, want %d", b, 3+itemOverhead)
	}
	r.itemBytes("k", 1000, true)
	r.itemBytes("k", 2000, true)
	if b := r.itemBytes("abc", 0, false); b != 1+1500+itemOverhead {
		t.Fatalf("a miss: %d bytes, want the mean found, %d", b, 1+1500+itemOverhead)
	}
}

// However many keys pass, MaxFollowed are followed, and the order of
// gets sums exactly the bytes of the keys followed, at every moment (a
// renumbering rebuilds it from the keys followed, and would hide an error
// made before it).
func TestTheSampleKeepsItsSizeAndItsSums(t *testing.T) {
	r := newReuseTrackerSalted(3)
	for i := range 100000 {
		r.get(fmt.Sprintf("key:%d", (i*7)%30000+i/20000), int64(i%700), i%3 != 0)
		if i%997 != 0 && i != 99999 {
			continue
		}
		var want int64
		for _, f := range r.keys {
			if f.pos < 0 || f.hash >= r.threshold {
				t.Fatalf("after %d gets: %+v followed, threshold %d", i, f, r.threshold)
			}
			want += f.bytes
		}
		if got := r.tree.upTo(r.tree.size() - 1); got != want {
			t.Fatalf("after %d gets, the order of gets sums %d bytes, the keys followed %d", i, got, want)
		}
	}
	if len(r.keys) != MaxFollowed || len(r.byHash) != MaxFollowed {
		t.Fatalf("%d keys followed (%d in the heap), want %d", len(r.keys), len(r.byHash), MaxFollowed)
	}
}

// Only a get with its time and key is one.
func TestOnlyAGetWithItsTimeAndKeyIsOne(t *testing.T) {
	for line, want := range map[string]bool{
		"ts=7.000001 gid=1 type=item_get key=a status=found clsid=1 cfd=25 size=3": true,
		"gid=1 type=item_get key=a status=found clsid=1 cfd=25 size=3":             false,
		"ts=7.000001 gid=1 type=item_get status=found clsid=1 cfd=25 size=3":       false,
		"ts=7.000001 gid=1 type=item_store key=a status=stored cmd=set size=3":     false,
	} {
		if _, ok := parseGet(line); ok != want {
			t.Errorf("%q taken as a get: %v", line, ok)
		}
	}
}

// The estimate at one slot fewer and one more, for sizes of 2 and 4: a
// slot of 100 MiB serves up to 80 MiB (Headroom), in its own keys; the
// distances are in bins no size of the test cuts.
func TestTheEstimateScalesTheDistancesByTheSlots(t *testing.T) {
	gets := map[float64]float64{35 << 20: 10, 50 << 20: 10, 70 << 20: 10, 140 << 20: 10, 1 << 40: 60}
	for _, tt := range []struct {
		size int32
		lost float64
	}{
		// 2 slots: 1 serves up to 40 MiB (35), 3 up to 120 MiB (as 2).
		{2, 0.2},
		// 4 slots: 3 serve up to 60 MiB (35 and 50), 5 up to 100 MiB.
		{4, 0.1},
	} {
		s := Sample{HitRatio: 0.5, GetsPerSecond: 100, SlotBytes: 100 << 20, Reuse: reuseAt(600, gets)}
		e := estimateOf(s, tt.size, 10*time.Minute)
		if !e.known || math.Abs(e.lost-tt.lost) > 1e-9 || e.gained != 0 {
			t.Errorf("%d slots: %+v, want %.2f lost and none gained", tt.size, e, tt.lost)
		}
	}
	s := Sample{Reuse: &Reuse{Seconds: 600, Coverage: 0.5}}
	if why := estimateOf(s, 2, 10*time.Minute).says(2); !strings.Contains(why, "only 50% of the gets for the pods to read (under 90%)") {
		t.Errorf("the reason: %q", why)
	}
}

// A window with no line has a coverage of 1, not an undefined one.
func TestAWindowWithoutGetsIsCoveredWhole(t *testing.T) {
	c := reuseCounts{started: 600, keep: 60}
	if r := c.over(700, 60); r == nil || r.Coverage != 1 {
		t.Fatalf("%+v", r)
	}
}

// A follower counts the gets from when memcached accepts its watch (its
// clock at the last request), and one whose watch is refused tries again
// after watchRetry, not at once.
func TestAFollowerCountsFromItsWatchAndRetriesAfterAPause(t *testing.T) {
	var dials atomic.Int32
	for answer, want := range map[string]int64{"OK\r\n": 10, "ERROR\r\n": -1} {
		dials.Store(0)
		dial := func(ctx context.Context) (net.Conn, error) {
			dials.Add(1)
			client, server := net.Pipe()
			go func() {
				buf := make([]byte, 64)
				if _, err := server.Read(buf); err == nil {
					_, _ = io.WriteString(server, answer)
				}
				if answer != "OK\r\n" {
					server.Close()
				}
			}()
			return client, nil
		}
		k := &keyStream{dial: dial, log: slog.New(slog.DiscardHandler)}
		k.reuse(5000, 60)
		time.Sleep(300 * time.Millisecond)
		r := k.reuse(5010, 60)
		switch {
		case want < 0 && (r != nil || dials.Load() != 1):
			t.Errorf("a refused watch: %+v, dialled %d times in 300 ms, want once", r, dials.Load())
		case want >= 0 && (r == nil || r.Seconds != want):
			t.Errorf("a watch accepted at 5000: %+v, want counted over %d s", r, want)
		}
	}
}

// More lines skipped than received is a coverage under a half.
func TestMoreSkippedThanReceivedIsALowCoverage(t *testing.T) {
	k := &keyStream{tracker: newReuseTrackerSalted(0), counts: reuseCounts{started: 6000, keep: 60}}
	for i := range 10 {
		k.take(fmt.Sprintf("ts=6010.%06d gid=%d type=item_get key=k status=found clsid=1 cfd=25 size=10", i, i))
	}
	k.take("skipped=30")
	if r := k.counts.over(6030, 60); r == nil || r.Coverage != 0.25 {
		t.Fatalf("%+v: want 10 of 40 lines", r)
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

// A follower no one has asked for the gets for its idle time stops, and
// closes its connection: memcached logs nothing to it any more.
func TestAFollowerNoOneAsksStopsAndCloses(t *testing.T) {
	closed := make(chan struct{})
	dial := func(ctx context.Context) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			buf := make([]byte, 64)
			if _, err := server.Read(buf); err == nil {
				_, _ = io.WriteString(server, "OK\r\n")
			}
			_, _ = io.Copy(io.Discard, server)
			close(closed)
		}()
		return client, nil
	}
	k := &keyStream{dial: dial, log: slog.New(slog.DiscardHandler), idle: 200 * time.Millisecond}
	k.reuse(5000, 60)
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("the connection was still open 2 s after the last request, 10 idle times")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.running {
		t.Fatal("still running after its idle time: the next request would not start a follower")
	}
}
