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
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
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
	// Dial reaches a server.
	Dial Dialer
	// Limit bounds how many keys a second it reads or writes, so that
	// clients' requests keep their latency; nil: no bound.
	Limit *rate.Limiter
	// Batch is how many keys go to a server in one round trip (100 if 0).
	Batch int
	// Timeout bounds each round trip (5 s if 0).
	Timeout time.Duration
}

// Copied is a key's copy: where it went and its CAS on both servers then.
type Copied struct {
	To      string
	FromCAS uint64
	ToCAS   uint64
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

// copyPasses is how many times Copy lists the server's keys: memcached's
// LRU crawler walks the HOT, WARM and COLD queues in turn, and can miss an
// item a client's get moves into a queue it has walked already. With one
// listing, a scale-down with gets running left 2 of 768 keys uncopied
// (bench-cache-check). A key the first listing missed is copied after the
// second.
const copyPasses = 2

// Copy copies every key server holds that after puts on another server to
// that server, unless it holds the key already.
func (m *Mover) Copy(ctx context.Context, server string, after *ring.Ring) (CopyResult, error) {
	res := CopyResult{Ledger: Ledger{}}
	conns := m.pool()
	defer conns.close()
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
		if err := m.copyTo(ctx, conns, server, byOwner, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// copyTo copies the keys of server to their owners (byOwner), counting in
// res.
func (m *Mover) copyTo(ctx context.Context, conns conns, server string, byOwner map[string][]string, res *CopyResult) error {
	for owner, leaving := range byOwner {
		for batch := range chunks(leaving, m.batch()) {
			if err := m.wait(ctx, len(batch)); err != nil {
				return err
			}
			src, err := conns.get(ctx, m, server)
			if err != nil {
				return err
			}
			items, err := src.get(m.deadline(), batch)
			if err != nil {
				return fmt.Errorf("reading from %s: %w", server, err)
			}
			res.Gone += len(batch) - len(items)
			dst, err := conns.get(ctx, m, owner)
			if err != nil {
				return err
			}
			cas, err := dst.add(m.deadline(), items)
			if err != nil {
				return fmt.Errorf("writing to %s: %w", owner, err)
			}
			for i, it := range items {
				if cas[i] == 0 {
					res.Present++
					continue
				}
				res.Copied++
				res.Ledger[it.key] = Copied{To: owner, FromCAS: it.cas, ToCAS: cas[i]}
			}
		}
	}
	return nil
}

// Settle deletes from server every key after puts elsewhere, and the copy
// of each such key that changed on server after ledger recorded it (unless
// the copy changed too).
func (m *Mover) Settle(ctx context.Context, server string, after *ring.Ring, ledger Ledger) (SettleResult, error) {
	var res SettleResult
	leaving, _, err := m.misplaced(ctx, server, after)
	if err != nil {
		return res, err
	}
	conns := m.pool()
	defer conns.close()
	for batch := range chunks(leaving, m.batch()) {
		if err := m.wait(ctx, len(batch)); err != nil {
			return res, err
		}
		src, err := conns.get(ctx, m, server)
		if err != nil {
			return res, err
		}
		// Keys copied and unchanged since are deleted only as they were
		// (their CAS): one written between the listing and now is found
		// changed, as one changed before the listing is.
		dels := make([]casKey, len(batch))
		for i, k := range batch {
			dels[i] = casKey{key: k.key}
			if c, copied := ledger[k.key]; copied && c.FromCAS == k.cas {
				dels[i].cas = k.cas
			}
		}
		deleted, err := src.delete(m.deadline(), dels)
		if err != nil {
			return res, fmt.Errorf("deleting from %s: %w", server, err)
		}
		var again []casKey
		invalid := map[string][]casKey{}
		for i, k := range batch {
			c, copied := ledger[k.key]
			switch {
			case !copied:
				res.Uncopied++
			case dels[i].cas != 0 && deleted[i]:
				res.Removed++
			default:
				// Written on this server after its copy: the copy is
				// older than that write.
				if dels[i].cas != 0 {
					again = append(again, casKey{key: k.key})
				}
				invalid[c.To] = append(invalid[c.To], casKey{key: k.key, cas: c.ToCAS})
				res.Invalidated++
			}
		}
		if len(again) > 0 {
			if _, err := src.delete(m.deadline(), again); err != nil {
				return res, fmt.Errorf("deleting from %s: %w", server, err)
			}
		}
		for owner, copies := range invalid {
			dst, err := conns.get(ctx, m, owner)
			if err != nil {
				return res, err
			}
			if _, err := dst.delete(m.deadline(), copies); err != nil {
				return res, fmt.Errorf("deleting from %s: %w", owner, err)
			}
		}
	}
	return res, nil
}

// misplaced lists server's keys and returns those after puts elsewhere,
// and how many it holds in all.
func (m *Mover) misplaced(ctx context.Context, server string, after *ring.Ring) ([]listed, int, error) {
	keys, err := m.list(ctx, server)
	if err != nil {
		return nil, 0, err
	}
	var out []listed
	for _, k := range keys {
		if after.Server(k.key) != server {
			out = append(out, k)
		}
	}
	return out, len(keys), nil
}

func (m *Mover) batch() int {
	if m.Batch > 0 {
		return m.Batch
	}
	return 100
}

func (m *Mover) deadline() time.Time {
	if m.Timeout > 0 {
		return time.Now().Add(m.Timeout)
	}
	return time.Now().Add(5 * time.Second)
}

func (m *Mover) wait(ctx context.Context, n int) error {
	if m.Limit == nil {
		return nil
	}
	for n > 0 {
		step := min(n, max(m.Limit.Burst(), 1))
		if err := m.Limit.WaitN(ctx, step); err != nil {
			return err
		}
		n -= step
	}
	return nil
}

// chunks yields s in slices of at most n.
func chunks[T any](s []T, n int) func(func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			c := s[:min(n, len(s))]
			s = s[len(c):]
			if !yield(c) {
				return
			}
		}
	}
}

// listed is a key as memcached's metadump lists it.
type listed struct {
	key string
	cas uint64
}

// list is every key server holds, from memcached's lru_crawler metadump on
// a connection of its own (memcached answers nothing else on it until the
// dump ends). A crawler already running (BUSY) is waited for.
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
	if _, err := nc.Write([]byte("lru_crawler metadump all\r\n")); err != nil {
		return nil, false, err
	}
	r := bufio.NewReaderSize(nc, 64<<10)
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

// conns are the connections of one Copy or Settle, one per server.
type conns map[string]*conn

func (m *Mover) pool() conns { return conns{} }

func (c conns) get(ctx context.Context, m *Mover, server string) (*conn, error) {
	if cn, ok := c[server]; ok {
		return cn, nil
	}
	nc, err := m.Dial(ctx, server)
	if err != nil {
		return nil, fmt.Errorf("reaching %s: %w", server, err)
	}
	cn := &conn{Conn: nc, r: bufio.NewReaderSize(nc, 64<<10)}
	c[server] = cn
	return cn, nil
}

func (c conns) close() {
	for _, cn := range c {
		cn.Close()
	}
}

// conn is a connection to one server, spoken to in meta commands.
type conn struct {
	net.Conn
	r *bufio.Reader
}

// peek waits until memcached's next answer has begun to arrive.
func (c *conn) peek() error {
	_, err := c.r.Peek(1)
	return err
}

func (c *conn) line() (string, error) { return readLine(c.r) }

// maxLine bounds a line memcached answers with, a key's metadump line the
// longest (a key of 250 bytes, each escaped in three, and its fields).
const maxLine = 4 << 10

// maxValue is the largest value memcached stores (its -I bound, 1 GiB):
// an answer announcing more is not memcached's.
const maxValue = 1 << 30

// readLine reads one line of an answer, at most maxLine bytes, without its
// end: a peer that sends a longer one is not followed further.
func readLine(r *bufio.Reader) (string, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine {
			return "", fmt.Errorf("memcached answered a line of more than %d bytes", maxLine)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return strings.TrimRight(string(line), "\r\n"), nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return "", err
		}
	}
}

// wireKey is key as a meta command carries it with the b flag: base64, so
// that no key, whatever bytes a client stored it with (the binary
// protocol takes any), reads as more than one word of a command line.
func wireKey(key string) string { return base64.StdEncoding.EncodeToString([]byte(key)) }

// get reads keys (value, client flags, time to live left, CAS); a key
// memcached no longer holds is left out.
func (c *conn) get(deadline time.Time, keys []string) ([]item, error) {
	c.SetDeadline(deadline)
	var req strings.Builder
	for _, k := range keys {
		req.WriteString("mg " + wireKey(k) + " b v f t c\r\n")
	}
	if _, err := c.Write([]byte(req.String())); err != nil {
		return nil, err
	}
	var out []item
	for _, k := range keys {
		line, err := c.line()
		if err != nil {
			return nil, err
		}
		if line == "EN" {
			continue
		}
		words := strings.Fields(line)
		if len(words) < 2 || words[0] != "VA" {
			return nil, fmt.Errorf("mg %s: memcached answered %q", k, line)
		}
		size, err := strconv.Atoi(words[1])
		if err != nil || size < 0 || size > maxValue {
			return nil, fmt.Errorf("mg %s: %q", k, line)
		}
		it := item{key: k, value: make([]byte, size+2)}
		for _, w := range words[2:] {
			var err error
			switch w[0] {
			case 'f':
				var f uint64
				f, err = strconv.ParseUint(w[1:], 10, 32)
				it.flags = uint32(f)
			case 't':
				it.ttl, err = strconv.ParseInt(w[1:], 10, 64)
			case 'c':
				it.cas, err = strconv.ParseUint(w[1:], 10, 64)
			}
			if err != nil {
				return nil, fmt.Errorf("mg %s: %q", k, line)
			}
		}
		if _, err := io.ReadFull(c.r, it.value); err != nil {
			return nil, err
		}
		if !bytes.HasSuffix(it.value, []byte("\r\n")) {
			return nil, fmt.Errorf("mg %s: the value does not end its line", k)
		}
		it.value = it.value[:size]
		if it.ttl == 0 {
			continue // expiring now: nothing to copy
		}
		out = append(out, it)
	}
	return out, nil
}

// add adds items where the server holds no value for them yet, each with
// its flags and time to live left, and returns each one's new CAS: 0 where
// the server held one already (memcached's add refused it).
func (c *conn) add(deadline time.Time, items []item) ([]uint64, error) {
	c.SetDeadline(deadline)
	// memcached (1.6.18) stops reading a TLS connection whose pipelined
	// requests hold values: what follows the first value waits in its TLS
	// buffer, which its event loop does not look at. Over TLS each value
	// goes on its own, its answer read before the next.
	_, oneByOne := c.Conn.(*tls.Conn)
	var req []byte
	for i, it := range items {
		ttl := it.ttl
		if ttl < 0 {
			ttl = 0 // none
		}
		req = fmt.Appendf(req, "ms %s %d b F%d T%d ME c\r\n", wireKey(it.key), len(it.value), it.flags, ttl)
		req = append(append(req, it.value...), '\r', '\n')
		if oneByOne || i == len(items)-1 {
			if _, err := c.Write(req); err != nil {
				return nil, err
			}
			req = req[:0]
		}
		if oneByOne {
			if err := c.peek(); err != nil {
				return nil, err
			}
		}
	}
	out := make([]uint64, len(items))
	for i, it := range items {
		line, err := c.line()
		if err != nil {
			return nil, err
		}
		switch {
		case line == "NS" || strings.HasPrefix(line, "NS "):
		case strings.HasPrefix(line, "HD"):
			for _, w := range strings.Fields(line)[1:] {
				if w[0] == 'c' {
					out[i], _ = strconv.ParseUint(w[1:], 10, 64)
				}
			}
			if out[i] == 0 {
				return nil, fmt.Errorf("ms %s: memcached answered %q, with no CAS", it.key, line)
			}
		default:
			return nil, fmt.Errorf("ms %s: memcached answered %q", it.key, line)
		}
	}
	return out, nil
}

// casKey is a key to delete: only while its CAS is cas, when not 0.
type casKey struct {
	key string
	cas uint64
}

// delete deletes keys, and tells of each whether memcached deleted it: a
// key that is gone, or whose CAS is no longer the one given, is left.
func (c *conn) delete(deadline time.Time, keys []casKey) ([]bool, error) {
	c.SetDeadline(deadline)
	var req strings.Builder
	for _, k := range keys {
		req.WriteString("md " + wireKey(k.key) + " b")
		if k.cas != 0 {
			req.WriteString(" C" + strconv.FormatUint(k.cas, 10))
		}
		req.WriteString("\r\n")
	}
	if _, err := c.Write([]byte(req.String())); err != nil {
		return nil, err
	}
	out := make([]bool, len(keys))
	for i, k := range keys {
		line, err := c.line()
		if err != nil {
			return nil, err
		}
		switch line {
		case "HD":
			out[i] = true
		case "NF", "EX":
		default:
			return nil, fmt.Errorf("md %s: memcached answered %q", k.key, line)
		}
	}
	return out, nil
}
