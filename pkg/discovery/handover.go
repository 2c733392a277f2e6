package discovery

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// memcachedVersion is the version memcached reports, asked at most every
// versionTTL: clients choose their discovery command by it.
func (s *Server) memcachedVersion(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.version != "" && time.Since(s.versionSeen) < versionTTL {
		return s.version, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := s.c.DialMemcached(ctx, s.c.Memcached)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	if _, err := io.WriteString(conn, "version\r\n"); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", err
	}
	v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "VERSION ")
	if !ok || v == "" {
		return "", fmt.Errorf("memcached answered %q", strings.TrimSpace(line))
	}
	s.version, s.versionSeen = v, time.Now()
	return v, nil
}

// handOver connects the client to memcached for the rest of its life:
// first the bytes read so far, then both ways until either side closes.
func (s *Server) handOver(ctx context.Context, c *session, read []byte) {
	if c.up == nil {
		up, err := s.c.DialMemcached(ctx, s.c.Memcached)
		if err != nil {
			s.c.Log.Error("cannot reach memcached", "error", err.Error())
			io.WriteString(c.conn, "SERVER_ERROR memcached is not answering\r\n")
			return
		}
		c.up = up
	}
	up, conn := c.up, c.conn
	stop := context.AfterFunc(ctx, func() { up.Close() })
	defer stop()
	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		return
	}
	buffered, _ := c.r.Peek(c.r.Buffered())
	if _, err := up.Write(append(read, buffered...)); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go pipe(up, conn)
	go pipe(conn, up)
	<-done
	<-done
}

var errNotACommand = errors.New("not a command")

// oldClusterKey is the key clients get from servers older than 1.4.14.
const oldClusterKey = "AmazonElastiCache:cluster"

// commandName reads a command's first word and the byte after it (' ',
// or the end of the line), and returns them as read.
func commandName(r *bufio.Reader) ([]byte, error) {
	var raw []byte
	for {
		b, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		raw = append(raw, b)
		name := bytes.TrimSuffix(raw[:len(raw)-1], []byte("\r"))
		switch {
		case b == ' ' || b == '\n':
			if len(name) == 0 {
				return nil, errNotACommand
			}
			return raw, nil
		case len(raw) > maxCommandName+1 || (b < 0x21 && b != '\r') || b > 0x7e:
			return nil, errNotACommand
		}
	}
}

// upTo reads the rest of a line, at most limit bytes: complete when they
// hold its end.
func upTo(r *bufio.Reader, limit int) ([]byte, bool, error) {
	var line []byte
	for len(line) < limit {
		b, err := r.ReadByte()
		if err != nil {
			return nil, false, err
		}
		line = append(line, b)
		if b == '\n' {
			return line, true, nil
		}
	}
	return line, false, nil
}

// refuse writes msg and closes conn so that the client reads msg: what it
// sent beyond is read and dropped for a moment, for a socket closed with
// unread data loses what was written to it.
func refuse(conn net.Conn, msg string) {
	if _, err := io.WriteString(conn, msg); err != nil {
		return
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	conn.SetReadDeadline(time.Now().Add(time.Second))
	io.Copy(io.Discard, io.LimitReader(conn, 1<<20))
}
