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
// count the working set, or a quarter of the window counted over when that
// is shorter: a walk takes memcached's crawler and reads every item's
// metadata, so the count it serves may be this old.
const DumpEvery = time.Minute

// dumpEvery is how old, in seconds, a count over seconds may be.
func dumpEvery(seconds int64) int64 {
	return min(int64(DumpEvery/time.Second), max(seconds/4, 1))
}

// Server serves a pod's Signals over HTTP, read from its memcached (Dial
// connects, logged in) on each request; the working set is counted at
// most once per dumpEvery and served from then until the next count.
type Server struct {
	Dial func(ctx context.Context) (net.Conn, error)
	Log  *slog.Logger

	mu      sync.Mutex
	counted workingSet
}

// itemUpdateInterval is how old an item's last access must be for a read
// to update it (memcached's ITEM_UPDATE_INTERVAL): the working set over
// seconds counts the items whose last access is at most this much older,
// so that none read within seconds is left out.
const itemUpdateInterval = 60

// workingSet is a count of the working set: when (memcached's clock),
// over how many seconds, and the bytes.
type workingSet struct{ at, seconds, bytes int64 }

// ServeHTTP answers GET SignalsPath with the pod's Signals as JSON.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != SignalsPath || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	seconds, _ := strconv.ParseInt(r.URL.Query().Get(WorkingSetParam), 10, 64)
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
// when 0) counted now unless a count over seconds is younger than
// dumpEvery.
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.counted; c.seconds != seconds || sig.Time-c.at >= dumpEvery(seconds) {
		bytes, busy, err := countWorkingSet(conn, sig.Time-seconds-itemUpdateInterval)
		switch {
		case err != nil:
			return Signals{}, err
		case !busy:
			s.counted = workingSet{at: sig.Time, seconds: seconds, bytes: bytes}
		}
	}
	if s.counted.seconds == seconds {
		sig.WorkingSetBytes, sig.WorkingSetSeconds, sig.WorkingSetTime = s.counted.bytes, seconds, s.counted.at
	}
	return sig, nil
}

// countWorkingSet is the bytes of the items conn's memcached read or
// wrote at since (its clock), from its lru_crawler metadump, which walks
// its hash table; busy: its crawler is in use (a move lists keys), and
// nothing was counted.
func countWorkingSet(conn net.Conn, since int64) (int64, bool, error) {
	if err := conn.SetDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		return 0, false, err
	}
	if _, err := conn.Write([]byte("lru_crawler metadump hash\r\n")); err != nil {
		return 0, false, err
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	var bytes int64
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, false, fmt.Errorf("counting the working set: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "END":
			return bytes, false, nil
		case strings.HasPrefix(line, "BUSY"):
			return 0, true, nil
		case !strings.HasPrefix(line, "key="):
			return 0, false, fmt.Errorf("counting the working set: memcached answered %q", line)
		}
		la, size, err := accessAndSize(line)
		if err != nil {
			return 0, false, err
		}
		if la >= since {
			bytes += size
		}
	}
}

// accessAndSize are the last access (la) and size fields of a metadump
// line.
func accessAndSize(line string) (la, size int64, err error) {
	la, size = -1, -1
	for field := range strings.FieldsSeq(line) {
		name, value, _ := strings.Cut(field, "=")
		switch name {
		case "la":
			la, err = strconv.ParseInt(value, 10, 64)
		case "size":
			size, err = strconv.ParseInt(value, 10, 64)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("counting the working set: %q: %w", line, err)
		}
	}
	if la < 0 || size < 0 {
		return 0, 0, errors.New("counting the working set: a metadump line without la or size: " + line)
	}
	return la, size, nil
}
