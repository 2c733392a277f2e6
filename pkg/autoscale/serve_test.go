//go:build integration

package autoscale

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/internal/testsupport/memcachedproc"
)

func get(t *testing.T, url string) Signals {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %s", resp.Status, b)
	}
	var s Signals
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func command(t *testing.T, conn net.Conn, req, want string) {
	t.Helper()
	buf := make([]byte, 4096)
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Read(buf)
	if err != nil || !strings.HasPrefix(string(buf[:n]), want) {
		t.Fatalf("%q: %q %v", req, buf[:n], err)
	}
}

// servedMemcached starts a memcached of mib MiB on host, a Server of its
// signals, and a connection to it, all ended with the test.
func servedMemcached(t *testing.T, host, mib string) (*httptest.Server, net.Conn) {
	t.Helper()
	addr := memcachedproc.StartOn(t, host, "-m", mib).Addr
	srv := &Server{Log: slog.New(slog.DiscardHandler), Dial: func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}}
	web := httptest.NewServer(srv)
	t.Cleanup(web.Close)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return web, conn
}

// TestTheSignalsAreMemcachedsOwn: a memcached of 2 MiB filled past its
// memory evicts items, some of them read, and the working set counts the
// items read in its window only (memcached 1.6.18's fetch=yes): every
// other item, about half of the bytes.
func TestTheSignalsAreMemcachedsOwn(t *testing.T) {
	web, conn := servedMemcached(t, "127.0.0.121", "2")
	value := strings.Repeat("v", 1000)
	for i := range 5000 {
		command(t, conn, fmt.Sprintf("set k%d 0 0 %d\r\n%s\r\n", i, len(value), value), "STORED")
		if i%2 == 0 {
			command(t, conn, fmt.Sprintf("get k%d\r\n", i), "VALUE")
		}
	}
	command(t, conn, "get k4999 k0\r\n", "VALUE")
	s := get(t, web.URL+SignalsPath)
	if s.LimitMaxbytes != 2<<20 || s.Evictions == 0 || s.readEvictions() == 0 || s.readEvictions() >= s.Evictions || s.GetHits == 0 || s.GetMisses == 0 {
		t.Fatalf("%+v: want evictions, some of read items, hits and a miss (k0)", s)
	}
	if s.WorkingSetBytes != -1 {
		t.Fatalf("working set %d counted unasked", s.WorkingSetBytes)
	}
	s = get(t, web.URL+SignalsPath+"?"+WorkingSetParam+"=3600")
	if s.WorkingSetBytes < s.Bytes*4/10 || s.WorkingSetBytes > s.Bytes*6/10 || s.WorkingSetSeconds != 3600 {
		t.Fatalf("%+v: every item was written within the hour, and every other one read: want about half of the bytes", s)
	}
	command(t, conn, "set fresh 0 0 5\r\nshort\r\n", "STORED")
	command(t, conn, "get fresh\r\n", "VALUE")
	again := get(t, web.URL+SignalsPath+"?"+WorkingSetParam+"=3600")
	if again.GetHits != s.GetHits+1 || again.WorkingSetBytes != s.WorkingSetBytes || again.WorkingSetTime != s.WorkingSetTime {
		t.Logf("first %+v", s)
		t.Fatalf("counted again within %s: %+v", DumpEvery, again)
	}
}

// TestTheWorkingSetCountsTheItemsOfItsWindow: an item whose last access
// (which memcached updates at most once a minute) is older than the window
// and a minute is left out; so is one not read since it was stored (a
// move's copy, a write no get followed), however recent.
func TestTheWorkingSetCountsTheItemsOfItsWindow(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	go func() {
		defer server.Close()
		buf := make([]byte, 64)
		if _, err := server.Read(buf); err != nil {
			return
		}
		io.WriteString(server, "key=a exp=-1 la=1000 cas=1 fetch=yes cls=1 size=100\r\n"+
			"key=b exp=-1 la=939 cas=2 fetch=yes cls=1 size=200\r\n"+
			"key=c exp=-1 la=940 cas=3 fetch=yes cls=1 size=400\r\n"+
			"key=d exp=-1 la=1000 cas=4 fetch=no cls=1 size=800\r\nEND\r\n")
	}()
	byAge, busy, err := countWorkingSet(client, 1000)
	if err != nil || busy {
		t.Fatalf("%v %v", busy, err)
	}
	if bytes := (workingSet{at: 1000, byAge: byAge}).over(0); bytes != 500 {
		t.Fatalf("%d: want a and c, 500 bytes", bytes)
	}
}

// TestTheGetsReuseDistancesAreMemcachedsOwn: once asked for its signals
// with a window, a pod follows its memcached's gets (memcached 1.6.18's
// "watch fetchers", where a set logs its own lookup), and a get's distance
// is the bytes of the distinct keys read since the key's last read, with
// its own. a, b and c (1,059 bytes each) stored, then each read twice:
// a's first read is after b's and c's stores (taken at the mean item size,
// not found), b's after c's store and a's read, then c and every second
// read after the two others read.
func TestTheGetsReuseDistancesAreMemcachedsOwn(t *testing.T) {
	web, conn := servedMemcached(t, "127.0.0.122", "16")
	window := web.URL + SignalsPath + "?" + WorkingSetParam + "=60"
	if s := get(t, window); s.Reuse != nil {
		t.Fatalf("%+v: distances before any get was followed", s.Reuse)
	}
	command(t, conn, "set probe 0 0 1\r\nx\r\n", "STORED")
	deadline := time.Now().Add(10 * time.Second)
	for r := get(t, window).Reuse; r == nil || len(r.PerSecond) == 0; r = get(t, window).Reuse {
		if time.Now().After(deadline) {
			t.Fatalf("no get followed in 10 s: %+v", r)
		}
		command(t, conn, "get probe\r\n", "VALUE")
		time.Sleep(100 * time.Millisecond)
	}
	value := strings.Repeat("v", 1000)
	for _, k := range []string{"a", "b", "c"} {
		command(t, conn, fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(value), value), "STORED")
	}
	for range 2 {
		for _, k := range []string{"a", "b", "c"} {
			command(t, conn, "get "+k+"\r\n", "VALUE")
		}
	}
	item, probe := float64(1+len(value)+itemOverhead), float64(len("probe")+1+itemOverhead)
	want := map[int]float64{reuseBin(2*probe + item): 1, reuseBin(probe + 2*item): 1, reuseBin(3 * item): 4}
	deadline = time.Now().Add(10 * time.Second)
	for {
		r := get(t, window).Reuse
		got := map[int]float64{}
		for bin := range want {
			if len(r.PerSecond) > bin {
				got[bin] = math.Round(100*r.PerSecond[bin]*float64(r.Seconds)) / 100
			}
		}
		if fmt.Sprint(got) == fmt.Sprint(want) && r.Coverage == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gets by bin %v (%+v), want %v", got, r, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
