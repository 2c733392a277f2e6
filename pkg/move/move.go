// Package move moves keys between the memcacheds of a Memcached when its
// slots change, so that a client hashing over the slots with the ring its
// family uses (pkg/ring) finds, after the change, the values it stored
// before it.
//
// A move has two steps around the new membership's publication:
//
//   - Copy, before: every key a server holds that the new ring puts on
//     another server is read (value, client flags, remaining time to live)
//     and added there, never replacing a value already there (memcached's
//     add: a value a client wrote on the new owner is newer). Each copy is
//     recorded with the key's CAS on both servers.
//   - Settle, once the clients have taken the new membership: every key the
//     server still holds that the new ring puts elsewhere is deleted from
//     it, so that no later change of the slots can bring an old value back.
//     Where the key changed on the old owner after its copy (a client not
//     yet on the new membership wrote it), the copy is deleted too, unless
//     it changed on the new owner since: a miss, never an older value.
//
// The keys are listed with memcached's lru_crawler metadump (on a
// connection of its own) and read and written with its meta commands, a
// batch at a time on one connection per server.
package move

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/example/memcached-operator/pkg/ring"
)

// Dialer connects to a server named as the ring names it (host:port),
// logged in when memcached asks it.
type Dialer func(ctx context.Context, server string) (net.Conn, error)

// Mover moves keys.
type Mover struct {
	// Dial reaches a server. A copy's lanes call it at once.
	Dial Dialer
	// Limit bounds how many keys a second it reads or writes, so that
	// clients' requests keep their latency; nil: no bound.
	Limit *rate.Limiter
	// Batch is how many keys go to a server in one round trip (100 if 0).
	Batch int
	// Lanes is how many parts of a server's keys are copied at once, each
	// on connections of its own (4 if 0).
	Lanes int
	// Timeout bounds each round trip (5 s if 0).
	Timeout time.Duration
	// ListIdle bounds how long a listing waits for its next line (30 s if
	// 0): memcached 1.6.18 answers nothing to a metadump while its LRU
	// crawler is held by another's that nobody reads. Past it the step
	// fails, saying so, rather than hold a leaving pod until its grace
	// period ends.
	ListIdle time.Duration
}

// Copied is a key's copy: where it went, its CAS on both servers then,
// and a digest of what was copied (its value and flags). memcached gives
// an item a new CAS when its slab rebalancer moves it to another page, so
// a CAS that changed says only that the key may have: the digest tells.
type Copied struct {
	To      string
	FromCAS uint64
	ToCAS   uint64
	Sum     uint64
}

// Ledger is the keys Copy copied from one server.
type Ledger map[string]Copied

// CopyResult is what Copy did.
type CopyResult struct {
	// Listed is how many keys the server held; Leaving how many of them
	// the new ring puts elsewhere.
	Listed, Leaving int
	// Copied were added to their new owner; Present were not, for it held
	// the key already; Gone were no longer on the server when read.
	Copied, Present, Gone int
	Ledger                Ledger
}

// SettleResult is what Settle did.
type SettleResult struct {
	// Removed: keys deleted from the server as copied (unchanged since).
	Removed int
	// Invalidated: keys that changed on the server after their copy; both
	// deleted (the copy kept where it changed on the new owner since).
	Invalidated int
	// Of Invalidated, Gone were no longer on the server when read again
	// (deleted by a client, or evicted), Rewritten held another value.
	Gone, Rewritten int
	// Uncopied: keys the new ring puts elsewhere that were never copied
	// (written after the copy); deleted from the server.
	Uncopied int
}

// item is a key as read from a server.
type item struct {
	key   string
	value []byte
	flags uint32
	ttl   int64 // seconds left; -1: none
	cas   uint64
}

// copyPasses is how many times Copy lists the server's keys. When the
// listing walked memcached's LRU queues, it could miss an item a client's
// get moved into a queue it had walked already: with one listing, a
// scale-down with gets running left 2 of 768 keys uncopied
// (bench-cache-check). It walks the hash table now (list), which can still
// miss an item the table moves while it grows; a key the first listing
// missed is copied after the second.
const copyPasses = 2

// Copy copies every key server holds that after puts on another server to
// that server, unless it holds the key already.
func (m *Mover) Copy(ctx context.Context, server string, after *ring.Ring) (CopyResult, error) {
	res := CopyResult{Ledger: Ledger{}}
	handled := map[string]bool{}
	for pass := range copyPasses {
		leaving, listed, err := m.misplaced(ctx, server, after)
		if err != nil {
			return res, err
		}
		if pass == 0 {
			res.Listed = listed
		}
		byOwner := map[string][]string{}
		for _, k := range leaving {
			if handled[k.key] {
				continue
			}
			handled[k.key] = true
			res.Leaving++
			owner := after.Server(k.key)
			byOwner[owner] = append(byOwner[owner], k.key)
		}
		if err := m.copyTo(ctx, server, byOwner, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// listed is a key as memcached's metadump lists it.
type listed struct {
	key string
	cas uint64
}

// list is every key server holds, from memcached's lru_crawler metadump on
// a connection of its own (memcached answers nothing else on it until the
// dump ends), which walks memcached's hash table: a walk of its LRU queues
// ("metadump all") misses the items that move between the queues while it
// walks, many of them in a memcached just filled (seen: about half the keys
// of pods a hand-off had just filled, with gets running). A crawler already
// running (BUSY) is waited for.
func (m *Mover) list(ctx context.Context, server string) ([]listed, error) {
	for {
		keys, busy, err := m.dump(ctx, server)
		if err != nil || !busy {
			return keys, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (m *Mover) dump(ctx context.Context, server string) ([]listed, bool, error) {
	nc, err := m.Dial(ctx, server)
	if err != nil {
		return nil, false, fmt.Errorf("listing the keys of %s: %w", server, err)
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return nil, false, err
	}
	if _, err := nc.Write([]byte("lru_crawler metadump hash\r\n")); err != nil {
		return nil, false, err
	}
	r := bufio.NewReaderSize(idleReader{ctx, nc, cmp.Or(m.ListIdle, 30*time.Second)}, 64<<10)
	var keys []listed
	for {
		line, err := readLine(r)
		if err != nil {
			return nil, false, fmt.Errorf("listing the keys of %s: %w", server, err)
		}
		switch {
		case line == "END":
			return keys, false, nil
		case strings.HasPrefix(line, "BUSY"):
			return nil, true, nil
		case !strings.HasPrefix(line, "key="):
			return nil, false, fmt.Errorf("listing the keys of %s: memcached answered %q", server, line)
		}
		k := listed{}
		for field := range strings.FieldsSeq(line) {
			name, value, _ := strings.Cut(field, "=")
			switch name {
			case "key":
				if k.key, err = url.PathUnescape(value); err != nil {
					return nil, false, fmt.Errorf("listing the keys of %s: %q: %w", server, line, err)
				}
			case "cas":
				if k.cas, err = strconv.ParseUint(value, 10, 64); err != nil {
					return nil, false, fmt.Errorf("listing the keys of %s: %q: %w", server, line, err)
				}
			}
		}
		keys = append(keys, k)
	}
}

// idleReader reads from a connection that fails a read after idle with
// nothing to read, or once ctx is done.
type idleReader struct {
	ctx context.Context
	net.Conn
	idle time.Duration
}

func (r idleReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	if err := r.SetReadDeadline(time.Now().Add(r.idle)); err != nil {
		return 0, err
	}
	return r.Conn.Read(p)
}

func (m *Mover) pool() conns { return conns{} }
