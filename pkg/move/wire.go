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

// maxKey is the longest key memcached takes on a command line (its
// KEY_MAX_LENGTH), as sent: memcached 1.6.18 bounds a base64 key before it
// decodes it.
const maxKey = 250

// wireKey is key as a meta command carries it: its word, and the flags to
// add after the command's other words. A key the text protocol takes as it
// is goes as it is; any other, whatever bytes a client stored it with (the
// binary protocol takes any), goes in base64 with the b flag, so that it
// never reads as more than one word of a command line. A key of more than
// 186 bytes that needs base64 cannot be sent at all (speakable).
func wireKey(key string) (word, flags string) {
	if plainKey(key) {
		return key, ""
	}
	return base64.StdEncoding.EncodeToString([]byte(key)), " b"
}

// plainKey tells whether key can go on a command line as it is: at most
// maxKey bytes, none a space or a control byte.
func plainKey(key string) bool {
	if key == "" || len(key) > maxKey {
		return false
	}
	for i := range len(key) {
		if key[i] <= ' ' || key[i] == 0x7f {
			return false
		}
	}
	return true
}

// speakable tells whether memcached takes key on a command line, as
// wireKey writes it.
func speakable(key string) bool {
	return plainKey(key) || base64.StdEncoding.EncodedLen(len(key)) <= maxKey
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
		word, flags := wireKey(it.key)
		req = fmt.Appendf(req, "ms %s %d%s F%d T%d ME c\r\n", word, len(it.value), flags, it.flags, ttl)
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
