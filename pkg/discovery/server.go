package discovery

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
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
	// Leaving tells whether the pod is handing its keys off (package
	// move): a peer about to copy keys here asks first ("config get
	// leaving"), and sends none to a slot whose memory is going. nil:
	// never.
	Leaving func() bool
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
		if !s.serveCommand(ctx, c, raw) {
			return
		}
	}
}

// serveCommand serves one command of c, whose name (and the space after
// it, if any) is raw: a login, a discovery command answered here, or one
// of memcached's, for which the connection is handed to memcached. more:
// the connection serves further commands.
func (s *Server) serveCommand(ctx context.Context, c *session, raw []byte) (more bool) {
	name := strings.TrimRight(string(raw), " \r\n")
	spaced := raw[len(raw)-1] == ' '
	switch {
	case !c.authenticated && name == "set" && spaced:
		return s.login(ctx, c, raw)
	case !c.authenticated:
		refuse(c.conn, "CLIENT_ERROR unauthenticated\r\n")
		return false
	case name == "get" && spaced:
		// get AmazonElastiCache:cluster is the discovery command of
		// servers older than 1.4.14; any other get is memcached's.
		rest, complete, err := upTo(c.r, maxDiscoveryLine)
		if err != nil {
			return false
		}
		if !complete || strings.TrimRight(string(rest), "\r\n") != oldClusterKey {
			s.handOver(ctx, c, append(raw, rest...))
			return false
		}
		raw = append(raw, rest...)
	case slices.Contains(dataCommands, name):
		s.handOver(ctx, c, raw)
		return false
	case spaced:
		rest, complete, err := upTo(c.r, maxDiscoveryLine)
		if err != nil {
			return false
		}
		if !complete {
			refuse(c.conn, "CLIENT_ERROR line too long\r\n")
			return false
		}
		raw = append(raw, rest...)
	}
	return s.answer(ctx, c.conn, strings.Fields(string(raw)))
}
