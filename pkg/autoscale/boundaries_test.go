package autoscale

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A signal exactly at its target is not over it; a hit ratio exactly at
// its target is not under it.
func TestATargetMetIsNotOverIt(t *testing.T) {
	p := policy()
	p.HitRatio = 0.9
	at := Sample{Slots: 1, ReadEvictionsPerMinute: 60, HitRatio: 0.9, WorkingSetBytes: -1}
	if d := Decide(p, 1, every(2*time.Minute, at), t0.Add(2*time.Minute)); d.Step(1) || d.Next != Hold {
		t.Fatalf("%+v: stepped at the targets", d)
	}
}

// The window counts the sample exactly its length old.
func TestTheSampleAtTheWindowsStartCounts(t *testing.T) {
	samples := every(time.Minute, Sample{Slots: 1, ReadEvictionsPerMinute: 600, WorkingSetBytes: -1})
	samples[0].ReadEvictionsPerMinute = 0
	if d := Decide(policy(), 1, samples, t0.Add(time.Minute)); d.Step(1) {
		t.Fatalf("%+v: the quiet sample a window old was not counted", d)
	}
}

// The reasons say the readings as they are.
func TestTheReasonsSayTheReadings(t *testing.T) {
	p := policy()
	p.HitRatio = 0.9
	low := Sample{Slots: 1, ReadEvictionsPerMinute: 5, HitRatio: 0.5, WorkingSetBytes: -1}
	if d := Decide(p, 1, every(2*time.Minute, low), t0.Add(2*time.Minute)); !strings.Contains(d.Reason, "hit ratio 50.0%, under the target of 90%, with 5.0 evictions") {
		t.Fatalf("reason %q", d.Reason)
	}
	quiet := Sample{Slots: 2, HitRatio: 0.99, GetsPerSecond: 12, WorkingSetBytes: 10 << 20, SlotBytes: 100 << 20}
	d := Decide(p, 2, every(20*time.Minute, quiet), t0.Add(20*time.Minute))
	if !strings.Contains(d.Reason, "(10.0 MiB) fit 1 slot (80.0 MiB with 20% headroom)") {
		t.Fatalf("reason %q", d.Reason)
	}
	p.HitRatio = 0
	busy := Sample{Slots: 1, ReadEvictionsPerMinute: 20, HitRatio: 0.99, GetsPerSecond: 12, WorkingSetBytes: 0, SlotBytes: 64 << 20}
	if d := Decide(p, 1, every(time.Minute, busy), t0.Add(time.Minute)); d.Reason != "20.0 evictions of read items a minute per slot (target 60), hit ratio 99.0% at 12 gets/s, working set 0.0 MiB of 64.0 MiB a slot; no estimate of the hit ratio at another size (no reuse distances counted)" {
		t.Fatalf("reason %q", d.Reason)
	}
	busy.WorkingSetBytes = -1
	if d := Decide(p, 1, every(time.Minute, busy), t0.Add(time.Minute)); !strings.Contains(d.Reason, "working set unknown") {
		t.Fatalf("reason %q", d.Reason)
	}
}

// A slot whose working set is unknown makes the sum unknown; readings at
// the same time give no rate; no get is a hit ratio of 1.
func TestASampleOfUnknownsSaysSo(t *testing.T) {
	var h History
	pods := map[string]string{"0": "a", "1": "b"}
	h.Add(t0, pods, map[string]Signals{"0": {Time: 100, Uptime: 10, WorkingSetBytes: 5}, "1": {Time: 100, Uptime: 10, WorkingSetBytes: -1}})
	s, ok := h.Add(t0.Add(time.Minute), pods, map[string]Signals{"0": {Time: 160, Uptime: 70, WorkingSetBytes: 5}, "1": {Time: 160, Uptime: 70, WorkingSetBytes: -1}})
	if !ok || s.WorkingSetBytes != -1 || s.HitRatio != 1 {
		t.Fatalf("%+v: want the working set unknown and a hit ratio of 1 without gets", s)
	}
	if s, ok := h.Add(t0.Add(2*time.Minute), pods, map[string]Signals{"0": {Time: 160, Uptime: 70, Evictions: 5}}); ok {
		t.Fatalf("%+v: a rate over no time", s)
	}
}

// A count of the working set may be a quarter of its window old, at most
// a minute, and at least 15 s: no window asked makes a pod walk its items
// more often.
func TestTheCountIsAsFreshAsItsWindowNeeds(t *testing.T) {
	for seconds, want := range map[int64]int64{1: 15, 8: 15, 60: 15, 100: 25, 240: 60, 3600: 60} {
		if got := dumpEvery(seconds); got != want {
			t.Errorf("dumpEvery(%d) = %d, want %d", seconds, got, want)
		}
	}
}

// A metadump line without la, size or fetch is refused; la and size of 0
// are read, and fetch=yes as read since stored.
func TestAMetadumpLineNeedsItsAccessAndSize(t *testing.T) {
	if _, _, _, err := accessAndSize("key=a exp=-1 cas=1 fetch=no cls=1 size=10"); err == nil {
		t.Error("a line without la read")
	}
	if _, _, _, err := accessAndSize("key=a exp=-1 la=5 cas=1 fetch=no cls=1"); err == nil {
		t.Error("a line without size read")
	}
	if _, _, _, err := accessAndSize("key=a exp=-1 la=5 cas=1 cls=1 size=10"); err == nil {
		t.Error("a line without fetch read")
	}
	if la, size, fetched, err := accessAndSize("key=a exp=-1 la=0 cas=1 fetch=no cls=1 size=0"); err != nil || la != 0 || size != 0 || fetched {
		t.Errorf("la=0 size=0 fetch=no: %d %d %v %v", la, size, fetched, err)
	}
	if _, _, fetched, err := accessAndSize("key=a exp=-1 la=0 cas=1 fetch=yes cls=1 size=0"); err != nil || !fetched {
		t.Errorf("fetch=yes: %v %v", fetched, err)
	}
}

// fakeMemcached answers stats with the time *now and a metadump with
// *items, on a connection of its own each dial.
func fakeMemcached(now *int64, items *[]string) func(context.Context) (net.Conn, error) {
	return func(context.Context) (net.Conn, error) {
		c, s := net.Pipe()
		go func() {
			defer s.Close()
			r := bufio.NewReader(s)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				switch strings.TrimSpace(line) {
				case "stats":
					fmt.Fprintf(s, "STAT time %d\r\nSTAT uptime 10\r\nSTAT bytes 0\r\nSTAT limit_maxbytes 1\r\nSTAT get_hits 0\r\nSTAT get_misses 0\r\nSTAT evictions 0\r\nSTAT evicted_unfetched 0\r\nEND\r\n", *now)
				case "lru_crawler metadump hash":
					io.WriteString(s, strings.Join(*items, "")+"END\r\n")
				}
			}
		}()
		return c, nil
	}
}

// The working set over a minute counts the items last touched up to two
// minutes ago (memcached updates a last access at most once a minute),
// and is counted again once a quarter of the window has passed.
func TestTheWorkingSetsWindowAndAge(t *testing.T) {
	now := int64(1000)
	items := []string{
		"key=in exp=-1 la=880 cas=1 fetch=yes cls=1 size=100\r\n",
		"key=out exp=-1 la=879 cas=2 fetch=yes cls=1 size=1000\r\n",
	}
	s := &Server{Dial: fakeMemcached(&now, &items), Log: slog.New(slog.DiscardHandler)}
	read := func() Signals {
		t.Helper()
		sig, err := s.read(context.Background(), 60)
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}
	if sig := read(); sig.WorkingSetBytes != 100 || sig.WorkingSetTime != 1000 {
		t.Fatalf("%+v: want the item of la=880 only", sig)
	}
	items = append(items, "key=new exp=-1 la=1014 cas=3 fetch=yes cls=1 size=10\r\n")
	now = 1014
	if sig := read(); sig.WorkingSetBytes != 100 {
		t.Fatalf("%+v: counted again within 15 s", sig)
	}
	now = 1015
	if sig := read(); sig.WorkingSetBytes != 10 || sig.WorkingSetTime != 1015 {
		t.Fatalf("%+v: want a new count after 15 s (la=880 is now out)", sig)
	}
	// Another window within 15 s: answered from the same count.
	items = append(items, "key=newer exp=-1 la=1020 cas=4 fetch=yes cls=1 size=1\r\n")
	now = 1020
	sig, err := s.read(context.Background(), 3600)
	if err != nil || sig.WorkingSetBytes != 1110 || sig.WorkingSetTime != 1015 || sig.WorkingSetSeconds != 3600 {
		t.Fatalf("%+v %v: want the count of 1015 over an hour (every item but the newer)", sig, err)
	}
}

// A window outside what autoscaling asks is refused, so that no request
// makes a pod count over a window it would not use.
func TestAWindowOutOfBoundsIsRefused(t *testing.T) {
	now := int64(1000)
	var items []string
	s := &Server{Dial: fakeMemcached(&now, &items), Log: slog.New(slog.DiscardHandler)}
	for _, v := range []string{"-1", "86401", "x"} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, SignalsPath+"?"+WorkingSetParam+"="+v, nil))
		if w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d", v, w.Code)
		}
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, SignalsPath+"?"+WorkingSetParam+"=86400", nil))
	if w.Code != http.StatusOK {
		t.Errorf("86400: %d %s", w.Code, w.Body)
	}
}
