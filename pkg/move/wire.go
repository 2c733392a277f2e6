package move

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// conns are the connections of one Copy or Settle, one per server.
type conns map[string]*conn

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

// get reads keys (value, client flags, time to live left, CAS); a key
// memcached no longer holds is left out.
func (c *conn) get(deadline time.Time, keys []string) ([]item, error) {
	c.SetDeadline(deadline)
	var req strings.Builder
	for _, k := range keys {
		word, flags := wireKey(k)
		req.WriteString("mg " + word + flags + " v f t c\r\n")
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
		it, err := valueLine(k, line)
		if err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(c.r, it.value); err != nil {
			return nil, err
		}
		if !bytes.HasSuffix(it.value, []byte("\r\n")) {
			return nil, fmt.Errorf("mg %s: the value does not end its line", k)
		}
		it.value = it.value[:len(it.value)-2]
		if it.ttl == 0 {
			continue // expiring now: nothing to copy
		}
		out = append(out, it)
	}
	return out, nil
}

// valueLine reads the line of memcached's answer to "mg <key> v f t c"
// that announces key's value: its item, the value's room made (its size
// and its line's end).
func valueLine(k, line string) (item, error) {
	words := strings.Fields(line)
	if len(words) < 2 || words[0] != "VA" {
		return item{}, fmt.Errorf("mg %s: memcached answered %q", k, line)
	}
	size, err := strconv.Atoi(words[1])
	if err != nil || size < 0 || size > maxValue {
		return item{}, fmt.Errorf("mg %s: %q", k, line)
	}
	it := item{key: k, value: make([]byte, size+2)}
	given := ""
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
			return item{}, fmt.Errorf("mg %s: %q", k, line)
		}
		given += w[:1]
	}
	if given != "ftc" {
		// Without its time to live, say, a value would read as expiring
		// now.
		return item{}, fmt.Errorf("mg %s: memcached answered %q, not the flags, time to live and CAS asked", k, line)
	}
	return it, nil
}

// recordBudget bounds the requests written at once over TLS. memcached
// (1.6.18) reads the part of a value a read did not bring straight into
// its item, exactly as long as it is: the rest of that TLS record stays in
// OpenSSL's buffer, which its event loop does not look at, and the
// connection stalls (seen: four values of 1 KiB, in Go's first records of
// about 1.2 KiB, wait for ever). A batch written as one record (the
// dialer writes each Write of up to 16 KiB as one, as memcachedconn.Dial
// does) is read whole into memcached's read buffer of 16 KiB, and a value
// larger than a record goes alone, its write ending where the value does.
const recordBudget = 15 << 10

// add adds items where the server holds no value for them yet, each with
// its flags and time to live left, and returns each one's new CAS: 0 where
// the server held one already (memcached's add refused it). In the clear
// the items go in one write; over TLS in writes of at most recordBudget
// (but for a larger item alone), each answered before the next.
func (c *conn) add(deadline time.Time, items []item) ([]uint64, error) {
	c.SetDeadline(deadline)
	_, overTLS := c.Conn.(*tls.Conn)
	out := make([]uint64, 0, len(items))
	var req, one []byte
	from := 0
	send := func(to int) error {
		if _, err := c.Write(req); err != nil {
			return err
		}
		req = req[:0]
		for _, it := range items[from:to] {
			cas, err := c.added(it)
			if err != nil {
				return err
			}
			out = append(out, cas)
		}
		from = to
		return nil
	}
	for i, it := range items {
		ttl := it.ttl
		if ttl < 0 {
			ttl = 0 // none
		}
		word, flags := wireKey(it.key)
		one = fmt.Appendf(one[:0], "ms %s %d%s F%d T%d ME c\r\n", word, len(it.value), flags, it.flags, ttl)
		one = append(append(one, it.value...), '\r', '\n')
		if overTLS && i > from && len(req)+len(one) > recordBudget {
			if err := send(i); err != nil {
				return nil, err
			}
		}
		req = append(req, one...)
	}
	if from < len(items) {
		if err := send(len(items)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// added reads memcached's answer to the add of it: the CAS it stored it
// with, or 0 where it held a value already.
func (c *conn) added(it item) (uint64, error) {
	line, err := c.line()
	if err != nil {
		return 0, err
	}
	switch {
	case line == "NS" || strings.HasPrefix(line, "NS "):
		return 0, nil
	case strings.HasPrefix(line, "HD"):
		for _, w := range strings.Fields(line)[1:] {
			if w[0] == 'c' {
				if cas, _ := strconv.ParseUint(w[1:], 10, 64); cas != 0 {
					return cas, nil
				}
			}
		}
		return 0, fmt.Errorf("ms %s: memcached answered %q, with no CAS", it.key, line)
	default:
		return 0, fmt.Errorf("ms %s: memcached answered %q", it.key, line)
	}
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
		word, flags := wireKey(k.key)
		req.WriteString("md " + word + flags)
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
