package autoscale

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/example/memcached-operator/pkg/memcachedconn"
)

// DumpEvery is how often at most a pod walks its memcached's items to
// count the working set, or a quarter of the window asked for when that is
// shorter, but never more often than DumpFloor: a walk takes memcached's
// crawler (which a key move's listing waits for) and reads every item's
// metadata, so the count served may be this old. Whoever asks, and for
// whatever window, a pod walks its items at most once per DumpFloor.
const (
	DumpEvery = time.Minute
	DumpFloor = 15 * time.Second
)

// MaxWorkingSetSeconds is the longest window a working set is asked over
// (spec.autoscaling.scaleDownSeconds' maximum).
const MaxWorkingSetSeconds = 86400

// dumpEvery is how old, in seconds, a count may be for a window of
// seconds.
func dumpEvery(seconds int64) int64 {
	return min(int64(DumpEvery/time.Second), max(seconds/4, int64(DumpFloor/time.Second)))
}

// Server serves a pod's Signals over HTTP, read from its memcached (Dial
// connects, logged in) on each request; the working set is counted at
// most once per dumpEvery, into the bytes by age it is served from for any
// window until the next count.
type Server struct {
	Dial func(ctx context.Context) (net.Conn, error)
	Log  *slog.Logger

	mu      sync.Mutex
	counted workingSet

	streamOnce sync.Once
	stream     *keyStream
}

// itemUpdateInterval is how old an item's last access must be for a read
// to update it (memcached's ITEM_UPDATE_INTERVAL): the working set over
// seconds counts the items whose last access is at most this much older,
// so that none read within seconds is left out.
const itemUpdateInterval = 60

// workingSet is a count of the working set: when (memcached's clock), and
// the bytes of the items by the age of their last access then, in seconds
// (the last, all older).
type workingSet struct {
	at    int64
	byAge []int64
}

// over is the working set over seconds: the bytes of the items whose last
// access is at most seconds and a minute old.
func (w workingSet) over(seconds int64) int64 {
	var bytes int64
	for _, b := range w.byAge[:min(seconds+itemUpdateInterval+1, int64(len(w.byAge)))] {
		bytes += b
	}
	return bytes
}

// ServeHTTP answers GET SignalsPath with the pod's Signals as JSON; a
// window outside 0 to MaxWorkingSetSeconds is refused.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != SignalsPath || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	seconds := int64(0)
	if v := r.URL.Query().Get(WorkingSetParam); v != "" {
		var err error
		if seconds, err = strconv.ParseInt(v, 10, 64); err != nil || seconds < 0 || seconds > MaxWorkingSetSeconds {
			http.Error(w, fmt.Sprintf("%s must be a number of seconds from 0 to %d", WorkingSetParam, MaxWorkingSetSeconds), http.StatusBadRequest)
			return
		}
	}
	sig, err := s.read(r.Context(), seconds)
	if err != nil {
		s.Log.Error("cannot read memcached's signals", "error", err.Error())
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(sig)
}

// read is memcached's Signals now, with the working set over seconds (none
// when 0), counted now unless the last count is younger than dumpEvery.
func (s *Server) read(ctx context.Context, seconds int64) (Signals, error) {
	conn, err := s.Dial(ctx)
	if err != nil {
		return Signals{}, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return Signals{}, err
	}
	stats, err := memcachedconn.Stats(conn)
	if err != nil {
		return Signals{}, err
	}
	sig, err := FromStats(stats)
	if err != nil || seconds <= 0 {
		return sig, err
	}
	s.streamOnce.Do(func() { s.stream = &keyStream{dial: s.Dial, log: s.Log} })
	sig.Reuse = s.stream.reuse(sig.Time, seconds)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counted.byAge == nil || sig.Time-s.counted.at >= dumpEvery(seconds) {
		byAge, busy, err := countWorkingSet(conn, sig.Time)
		switch {
		case err != nil:
			return Signals{}, err
		case !busy:
			s.counted = workingSet{at: sig.Time, byAge: byAge}
		}
	}
	if s.counted.byAge != nil {
		sig.WorkingSetBytes, sig.WorkingSetSeconds, sig.WorkingSetTime = s.counted.over(seconds), seconds, s.counted.at
	}
	return sig, nil
}

// countWorkingSet is the bytes of the items conn's memcached holds that
// were read since they were stored, by the age of their last access at now
// (its clock), from its lru_crawler metadump, which walks its hash table;
// busy: its crawler is in use (a move lists keys), and nothing was
// counted. An item stored and not read since (fetch=no: a write no get
// followed, or a move's copy) is left out: a smaller cache need not keep
// it to serve the reads, and a move's copies, each a write, would
// otherwise count as touched for the window and a minute after it.
func countWorkingSet(conn net.Conn, now int64) ([]int64, bool, error) {
	if err := conn.SetDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		return nil, false, err
	}
	if _, err := conn.Write([]byte("lru_crawler metadump hash\r\n")); err != nil {
		return nil, false, err
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	byAge := make([]int64, MaxWorkingSetSeconds+itemUpdateInterval+2)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, false, fmt.Errorf("counting the working set: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "END":
			return byAge, false, nil
		case strings.HasPrefix(line, "BUSY"):
			return nil, true, nil
		case !strings.HasPrefix(line, "key="):
			return nil, false, fmt.Errorf("counting the working set: memcached answered %q", line)
		}
		la, size, fetched, err := accessAndSize(line)
		if err != nil {
			return nil, false, err
		}
		if fetched {
			byAge[min(max(now-la, 0), int64(len(byAge)-1))] += size
		}
	}
}

// accessAndSize are the last access (la), size and fetch fields of a
// metadump line: fetched, the item was read since it was stored.
func accessAndSize(line string) (la, size int64, fetched bool, err error) {
	la, size = -1, -1
	fetch := ""
	for field := range strings.FieldsSeq(line) {
		name, value, _ := strings.Cut(field, "=")
		switch name {
		case "la":
			la, err = strconv.ParseInt(value, 10, 64)
		case "size":
			size, err = strconv.ParseInt(value, 10, 64)
		case "fetch":
			fetch = value
		}
		if err != nil {
			return 0, 0, false, fmt.Errorf("counting the working set: %q: %w", line, err)
		}
	}
	if la < 0 || size < 0 || (fetch != "yes" && fetch != "no") {
		return 0, 0, false, errors.New("counting the working set: a metadump line without la, size or fetch: " + line)
	}
	return la, size, fetch == "yes", nil
}
