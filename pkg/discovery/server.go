package discovery

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config says where a Server finds the membership and memcached.
type Config struct {
	// Membership is the file holding the cluster's Body (a ConfigMap's key
	// mounted in the pod). It is read at each request: the kubelet swaps
	// in new content whole.
	Membership string
	// Seal is the file holding the Seal the operator gave the pod: the
	// endpoint serves a membership only where the seal vouches for it,
	// and until then the last one it did (none, in a pod not told yet).
	// Empty: every membership is served as the file holds it.
	Seal string
	// Memcached is the pod's memcached, to which a connection that starts
	// with a data command is handed.
	Memcached string
	// DialMemcached connects to Memcached; nil: plain TCP.
	DialMemcached func(ctx context.Context, address string) (net.Conn, error)
	// Auth: memcached requires a login (an authentication file), which
	// the endpoint asks of a client before answering anything, and passes
	// to memcached to judge.
	Auth bool
	// CommandTimeout bounds the wait for each command a connection sends
	// before it is handed to memcached; a slower client is disconnected.
	CommandTimeout time.Duration
	// MaxConnections bounds the connections served at once, handed to
	// memcached or not (DefaultMaxConnections if 0): one more is closed at
	// once, unread. The container's memory is small and runs the key mover
	// too: each connection costs buffers (over TLS, tens of KiB).
	MaxConnections int
	// MaxConnectionsPerClient bounds those of one client address
	// (DefaultMaxConnectionsPerClient if 0), so that one client's flood
	// leaves the others served.
	MaxConnectionsPerClient int
	// Log receives what goes wrong; nil: nothing is logged.
	Log *slog.Logger
}

// DefaultMaxConnections is Config.MaxConnections' default: clients reach
// the endpoint to discover the slots, then reach memcached at the
// addresses it lists, and the Node client hands over only the connection
// it makes before its first discovery.
const DefaultMaxConnections = 128

// DefaultMaxConnectionsPerClient is Config.MaxConnectionsPerClient's
// default.
const DefaultMaxConnectionsPerClient = 16

const (
	// maxCommandName is longer than any memcached command's name: a first
	// word longer than that is not a command.
	maxCommandName = 16
	// maxDiscoveryLine bounds a discovery command's line.
	maxDiscoveryLine = 256
	// versionTTL is how long memcached's version, which the endpoint
	// reports as its own, is kept before it is asked again.
	versionTTL = 30 * time.Second
	// defaultCommandTimeout is Config.CommandTimeout's default.
	defaultCommandTimeout = 10 * time.Second
)

// dataCommands are memcached's commands (1.6, text and meta protocol)
// that a connection may start with to be handed to memcached. A connection
// that starts with anything else gets ERROR and is closed, costing
// memcached nothing.
var dataCommands = []string{
	"get", "gets", "gat", "gats", "set", "add", "replace", "append", "prepend", "cas",
	"incr", "decr", "delete", "touch", "stats", "flush_all", "verbosity",
	"mg", "ms", "md", "ma", "mn", "me",
}

// Server answers the discovery commands on the connections it accepts and
// hands every other connection to memcached.
type Server struct {
	c Config

	mu          sync.Mutex
	version     string
	versionSeen time.Time

	// sealedMu guards sealed, the last membership the seal vouched for.
	sealedMu sync.Mutex
	sealed   []byte
}

// New returns a Server for c.
func New(c Config) *Server {
	if c.CommandTimeout == 0 {
		c.CommandTimeout = defaultCommandTimeout
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxConnectionsPerClient <= 0 {
		c.MaxConnectionsPerClient = DefaultMaxConnectionsPerClient
	}
	if c.DialMemcached == nil {
		d := &net.Dialer{Timeout: 5 * time.Second}
		c.DialMemcached = func(ctx context.Context, address string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", address)
		}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return &Server{c: c}
}

// Serve accepts connections on ln until ctx ends, and then closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	open := connections{max: s.c.MaxConnections, perClient: s.c.MaxConnectionsPerClient, by: map[string]int{}}
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		client, _, _ := net.SplitHostPort(conn.RemoteAddr().String())
		if refused := open.take(client); refused != "" {
			// Closed before a byte is read: no handshake, no buffer.
			conn.Close()
			if refused != open.told {
				s.c.Log.Warn("refusing connections", "why", refused, "maxConnections", s.c.MaxConnections, "maxConnectionsPerClient", s.c.MaxConnectionsPerClient)
				open.told = refused
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { open.give(client); wg.Done() }()
			s.serveConn(ctx, conn)
		}()
	}
}

// connections counts the connections served, in all and by client
// address.
type connections struct {
	mu             sync.Mutex
	max, perClient int
	n              int
	by             map[string]int
	// told is the last refusal logged: one line per kind of refusal in a
	// row, not one per connection.
	told string
}

// take counts a connection of client, or says why it is refused.
func (c *connections) take(client string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.n >= c.max:
		return "the endpoint serves its most connections at once"
	case c.by[client] >= c.perClient:
		return "a client has its most connections at once"
	}
	c.n++
	c.by[client]++
	c.told = ""
	return ""
}

func (c *connections) give(client string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if c.by[client]--; c.by[client] <= 0 {
		delete(c.by, client)
	}
}

// session is one client connection.
type session struct {
	conn net.Conn
	r    *bufio.Reader
	// up is the connection to memcached once one is opened: to check a
	// login, then to hand the client over.
	up net.Conn
	// authenticated: memcached accepted the client's login, or none is
	// needed.
	authenticated bool
}

// serveConn answers conn's discovery commands until it sends a data
// command, then hands it to memcached.
func (s *Server) serveConn(ctx context.Context, conn net.Conn) {
	c := &session{conn: conn, r: bufio.NewReader(conn), authenticated: !s.c.Auth}
	defer func() {
		conn.Close()
		if c.up != nil {
			c.up.Close()
		}
	}()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	for {
		if err := conn.SetReadDeadline(time.Now().Add(s.c.CommandTimeout)); err != nil {
			return
		}
		raw, err := commandName(c.r)
		if err != nil {
			if errors.Is(err, errNotACommand) {
				refuse(conn, "ERROR\r\n")
			}
			return
		}
		name := strings.TrimRight(string(raw), " \r\n")
		spaced := raw[len(raw)-1] == ' '
		switch {
		case !c.authenticated && name == "set" && spaced:
			if !s.login(ctx, c, raw) {
				return
			}
			continue
		case !c.authenticated:
			refuse(conn, "CLIENT_ERROR unauthenticated\r\n")
			return
		case name == "get" && spaced:
			// get AmazonElastiCache:cluster is the discovery command of
			// servers older than 1.4.14; any other get is memcached's.
			rest, complete, err := upTo(c.r, maxDiscoveryLine)
			if err != nil {
				return
			}
			if !complete || strings.TrimRight(string(rest), "\r\n") != oldClusterKey {
				s.handOver(ctx, c, append(raw, rest...))
				return
			}
			raw = append(raw, rest...)
		case slices.Contains(dataCommands, name):
			s.handOver(ctx, c, raw)
			return
		case spaced:
			rest, complete, err := upTo(c.r, maxDiscoveryLine)
			if err != nil {
				return
			}
			if !complete {
				refuse(conn, "CLIENT_ERROR line too long\r\n")
				return
			}
			raw = append(raw, rest...)
		}
		if !s.answer(ctx, conn, strings.Fields(string(raw))) {
			return
		}
	}
}

// maxLogin bounds a login's data: a user name and a password.
const maxLogin = 1024

// login passes the client's login (memcached's ASCII authentication: a set
// whose data is "user password") to memcached, which alone judges it, and
// relays its answer; false: refused, and the connection is to be closed.
// The connection to memcached it opens is the one the client is handed
// over on, logged in.
func (s *Server) login(ctx context.Context, c *session, raw []byte) bool {
	rest, complete, err := upTo(c.r, maxDiscoveryLine)
	if err != nil {
		return false
	}
	fields := strings.Fields(string(rest))
	var n int
	if !complete || len(fields) < 4 {
		refuse(c.conn, "CLIENT_ERROR bad command line format\r\n")
		return false
	}
	if _, err := fmt.Sscan(fields[3], &n); err != nil || n < 0 || n > maxLogin {
		refuse(c.conn, "CLIENT_ERROR bad data chunk\r\n")
		return false
	}
	data := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, data); err != nil {
		return false
	}
	if c.up == nil {
		if c.up, err = s.c.DialMemcached(ctx, s.c.Memcached); err != nil {
			s.c.Log.Error("cannot reach memcached", "error", err.Error())
			refuse(c.conn, "SERVER_ERROR memcached is not answering\r\n")
			return false
		}
	}
	c.up.SetDeadline(time.Now().Add(s.c.CommandTimeout))
	if _, err := c.up.Write(slices.Concat(raw, rest, data)); err != nil {
		return false
	}
	reply, err := bufio.NewReader(c.up).ReadString('\n')
	if err != nil {
		return false
	}
	c.up.SetDeadline(time.Time{})
	if strings.TrimRight(reply, "\r\n") != "STORED" {
		refuse(c.conn, reply)
		return false
	}
	c.authenticated = true
	_, err = io.WriteString(c.conn, reply)
	return err == nil
}

// answer writes the answer to a discovery command; false: the command is
// not one, and the connection is to be closed.
func (s *Server) answer(ctx context.Context, conn net.Conn, words []string) bool {
	var reply []byte
	switch strings.Join(words, " ") {
	case "quit":
		return false
	case "version":
		v, err := s.memcachedVersion(ctx)
		if err != nil {
			s.c.Log.Error("memcached does not say its version", "error", err.Error())
			reply = []byte("SERVER_ERROR memcached is not answering\r\n")
			break
		}
		reply = []byte("VERSION " + v + "\r\n")
	case "config get cluster":
		body, err := s.membership()
		if err != nil {
			reply = []byte("SERVER_ERROR " + err.Error() + "\r\n")
			break
		}
		reply = fmt.Appendf(nil, "CONFIG cluster 0 %d\r\n%s\r\nEND\r\n", len(body), body)
	case "get " + oldClusterKey:
		body, err := s.membership()
		if err != nil {
			reply = []byte("SERVER_ERROR " + err.Error() + "\r\n")
			break
		}
		reply = fmt.Appendf(nil, "VALUE %s 0 %d\r\n%s\r\nEND\r\n", oldClusterKey, len(body), body)
	default:
		refuse(conn, "ERROR\r\n")
		return false
	}
	_, err := conn.Write(reply)
	return err == nil
}

// membership is the cluster's Body as the mounted file holds it, checked,
// and where the pod has a seal, the last one the seal vouched for: a
// membership no seal vouches for (written by another than the operator,
// or newer than the seal the kubelet wrote so far) is not served.
func (s *Server) membership() ([]byte, error) {
	body, err := s.mounted()
	if err != nil || s.c.Seal == "" {
		return body, err
	}
	seal, serr := ReadSeal(s.c.Seal)
	s.sealedMu.Lock()
	defer s.sealedMu.Unlock()
	switch {
	case serr == nil && seal.VouchesCluster(body):
		s.sealed = body
	case s.sealed == nil && (serr == nil || errors.Is(serr, ErrNoSeal)):
		return nil, errors.New("no membership is published yet")
	case s.sealed == nil:
		s.c.Log.Error("cannot read the seal", "error", serr.Error())
		return nil, errors.New("the membership cannot be read")
	}
	if serr == nil && !seal.VouchesCluster(body) {
		s.c.Log.Warn("serving the last sealed membership: the seal does not vouch for the mounted one")
	}
	return s.sealed, nil
}

// mounted is the cluster's Body as the mounted file holds it, checked.
func (s *Server) mounted() ([]byte, error) {
	f, err := os.Open(s.c.Membership)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errors.New("no membership is published yet")
		}
		s.c.Log.Error("cannot read the membership", "error", err.Error())
		return nil, errors.New("the membership cannot be read")
	}
	defer f.Close()
	body, err := io.ReadAll(io.LimitReader(f, maxClusterBytes+1))
	if err == nil {
		_, err = Parse(body)
	}
	if err != nil {
		s.c.Log.Error("the membership is not usable", "error", err.Error())
		return nil, errors.New("the membership cannot be read")
	}
	return body, nil
}

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
