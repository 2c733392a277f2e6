package autoscale

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// WatchIdle is how long a pod follows its memcached's gets after the last
// request for its signals with a window: with no autoscaler asking, it
// stops, and memcached logs nothing.
const WatchIdle = 5 * time.Minute

// watchRetry is the pause before following the gets again after the
// connection is lost.
const watchRetry = 5 * time.Second

// keyStream follows a memcached's gets through its "watch fetchers" log,
// one line per get (memcached 1.6), and counts the reuse distances of a
// sample of its keys while it is asked for them.
type keyStream struct {
	dial func(ctx context.Context) (net.Conn, error)
	log  *slog.Logger
	// idle is WatchIdle when 0.
	idle time.Duration

	mu      sync.Mutex
	tracker *reuseTracker
	counts  reuseCounts
	asked   time.Time
	// running: a follower runs (or waits to retry); following: memcached
	// has accepted its watch, and every get since is logged to it. now is
	// memcached's clock at the last request.
	running, following bool
	now                int64
	// gen counts the followers started: one stopped for idleness says
	// nothing of the one started after it.
	gen int
}

// reuse is the gets by reuse distance over the last seconds at now
// (memcached's clock), and starts following the gets when they are not
// followed yet: nil while memcached does not log them to the pod, and
// until a second has passed since it began to.
func (k *keyStream) reuse(now, seconds int64) *Reuse {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.asked, k.now = time.Now(), now
	if !k.running {
		k.running, k.following = true, false
		k.tracker, k.counts = newReuseTracker(), reuseCounts{}
		k.gen++
		go k.run(k.gen)
	}
	k.counts.keep = max(k.counts.keep, seconds)
	if !k.following {
		return nil
	}
	return k.counts.over(now, seconds)
}

// follows says whether memcached logs the gets to follower gen, from when
// (memcached's clock, the first time) they are counted.
func (k *keyStream) follows(gen int, yes bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if gen != k.gen {
		return
	}
	k.following = yes
	if yes && k.counts.started == 0 {
		k.counts.started = k.now
	}
}

// run follows the gets until no one has asked for them for WatchIdle.
func (k *keyStream) run(gen int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	after := cmp.Or(k.idle, WatchIdle)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(after / 10):
			}
			k.mu.Lock()
			idle := time.Since(k.asked) > after
			if idle {
				k.running = false
			}
			k.mu.Unlock()
			if idle {
				cancel()
			}
		}
	}()
	for ctx.Err() == nil {
		if err := k.follow(ctx, gen); ctx.Err() == nil {
			k.log.Error("cannot follow memcached's gets", "error", err.Error())
			select {
			case <-ctx.Done():
			case <-time.After(watchRetry):
			}
		}
	}
}

// follow reads memcached's log of gets until ctx ends or the connection
// fails.
func (k *keyStream) follow(ctx context.Context, gen int) error {
	conn, err := k.dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("watch fetchers\r\n")); err != nil {
		return err
	}
	r := bufio.NewReaderSize(conn, 256<<10)
	if line, err := r.ReadString('\n'); err != nil || line != "OK\r\n" {
		return fmt.Errorf("watch fetchers: memcached answered %q: %v", line, err)
	}
	k.follows(gen, true)
	defer k.follows(gen, false)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("reading memcached's log of gets: %w", err)
		}
		k.take(strings.TrimRight(line, "\r\n"))
	}
}

// take counts one line of memcached's log: a get, or the lines memcached
// skipped.
func (k *keyStream) take(line string) {
	if n, ok := strings.CutPrefix(line, "skipped="); ok {
		skipped, err := strconv.ParseFloat(n, 64)
		if err == nil {
			k.mu.Lock()
			k.counts.at(k.counts.lastSeen()).skipped += skipped
			k.mu.Unlock()
		}
		return
	}
	g, ok := parseGet(line)
	if !ok {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.counts.at(g.at)
	e.lines++
	distance, weight, followed, cold := k.tracker.get(g.key, g.size, g.found)
	e.sampled += weight
	if followed && !cold {
		e.bins[reuseBin(distance)] += weight
	}
}

// aGet is one get memcached logged.
type aGet struct {
	at    int64
	key   string
	size  int64
	found bool
}

// parseGet reads a line of memcached's fetchers log, "ts=<seconds>.<us>
// gid=<n> type=item_get key=<key> status=<found|not_found|...> clsid=<n>
// cfd=<n> size=<value bytes>"; false for any other line.
func parseGet(line string) (aGet, bool) {
	var g aGet
	isGet := false
	for field := range strings.FieldsSeq(line) {
		name, value, _ := strings.Cut(field, "=")
		switch name {
		case "ts":
			s, _, _ := strings.Cut(value, ".")
			g.at, _ = strconv.ParseInt(s, 10, 64)
		case "type":
			isGet = value == "item_get"
		case "key":
			g.key = value
		case "status":
			g.found = value == "found"
		case "size":
			g.size, _ = strconv.ParseInt(value, 10, 64)
		}
	}
	return g, isGet && g.key != "" && g.at > 0
}
