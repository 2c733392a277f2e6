// Command discovery runs beside memcached in a Memcached's pod and serves
// the Memcached's membership as AWS ElastiCache's auto discovery does
// (config get cluster), from a file the operator publishes (a ConfigMap
// the pod mounts); a connection that starts with memcached's own commands
// is handed to the pod's memcached (package discovery).
//
// It makes no request to the apiserver: every pod serves the same file,
// so the endpoint answers while any pod does, with or without the
// operator. With --plan, it also does this pod's part of each move of keys
// the operator publishes beside the membership (package move), and says
// what it did in its log; with --hand-off-dir, it hands the pod's keys to
// the other slots when the pod's preStop hooks ask (--await-hand-off, the
// hooks' own command).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/time/rate"

	"github.com/example/memcached-operator/pkg/autoscale"
	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/memcachedconn"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/ring"
)

func main() {
	var (
		c                 discovery.Config
		listen, tlsDir    string
		clientCertificate bool
		plan, authFile    string
		moveRate          int
		h                 handOff
		signals           string
	)
	flag.StringVar(&listen, "listen", ":11212", "Address clients reach the endpoint on.")
	flag.StringVar(&c.Membership, "membership", "/etc/memcached/membership/cluster", "File holding the membership the operator publishes.")
	flag.StringVar(&c.Memcached, "memcached-address", "localhost:11211", "memcached's address in the pod.")
	flag.StringVar(&tlsDir, "tls-dir", "", "Directory of the tls.crt, tls.key and ca.crt memcached serves: the endpoint serves them, and reaches memcached over TLS; empty: no TLS.")
	flag.BoolVar(&clientCertificate, "client-certificate", false, "Ask clients for a certificate of ca.crt, as memcached does, and present tls.crt to memcached.")
	flag.BoolVar(&c.Auth, "auth", false, "memcached requires a login, which clients must pass before the endpoint answers.")
	flag.StringVar(&plan, "plan", "", "File holding the move of keys the operator publishes; empty: keys are not moved.")
	flag.StringVar(&c.Seal, "seal", "", "File holding the seal the operator gives the pod (an annotation it mounts): the membership and the plan are followed only where it vouches for them; empty: always.")
	flag.StringVar(&authFile, "auth-file", "", "memcached's authentication file, whose first entry logs in to the pods keys are moved between.")
	flag.IntVar(&moveRate, "move-rate", 20000, "Keys a second a move reads and writes at most.")
	flag.IntVar(&c.MaxConnections, "max-connections", discovery.DefaultMaxConnections, "Connections served at once, handed to memcached or not; one more is closed unread.")
	flag.IntVar(&c.MaxConnectionsPerClient, "max-connections-per-client", discovery.DefaultMaxConnectionsPerClient, "Connections of one client address served at once.")
	flag.StringVar(&signals, "signals-listen", "", "Address to serve memcached's statistics on over HTTP (GET /signals), for the operator's autoscaling; empty: not served.")
	h.bind()
	flag.Parse()

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	c.Log = log
	if h.await != "" {
		if err := move.AwaitHandOff(context.Background(), h.await, move.DiscoveryHook, 0); err != nil {
			log.Error("cannot await the hand-off", "error", err.Error())
			os.Exit(1)
		}
		return
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		log.Error("cannot listen", "address", listen, "error", err.Error())
		os.Exit(1)
	}
	if tlsDir != "" {
		ln = tls.NewListener(ln, discovery.ServedTLS(tlsDir, clientCertificate))
		c.DialMemcached = discovery.DialServedTLS(tlsDir, clientCertificate)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log.Info("serving the membership", "address", listen, "membership", c.Membership, "tls", tlsDir != "", "auth", c.Auth)
	if plan != "" {
		if c.Leaving, err = startMoves(ctx, c, plan, memcachedconn.ServedFiles(tlsDir, clientCertificate, authFile), moveRate, h, listen); err != nil {
			log.Error("cannot follow the moves of keys", "error", err.Error())
			os.Exit(1)
		}
	}
	go serveSignals(ctx, signals, c, memcachedconn.ServedFiles(tlsDir, clientCertificate, authFile))
	if err := discovery.New(c).Serve(ctx, ln); err != nil {
		log.Error("serving failed", "error", err.Error())
		stop()
		os.Exit(1)
	}
}

// serveSignals serves the pod's memcached's statistics on listen until ctx
// ends, reaching memcached through local; it stops the process if it
// cannot listen. An empty listen serves nothing.
func serveSignals(ctx context.Context, listen string, c discovery.Config, local memcachedconn.Files) {
	if listen == "" {
		return
	}
	srv := &http.Server{
		Addr: listen,
		Handler: &autoscale.Server{Log: c.Log, Dial: func(ctx context.Context) (net.Conn, error) {
			return local.Dial(ctx, c.Memcached)
		}},
		ReadHeaderTimeout: 5 * time.Second,
	}
	context.AfterFunc(ctx, func() { srv.Close() })
	c.Log.Info("serving memcached's signals", "address", listen)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		c.Log.Error("cannot serve the signals", "address", listen, "error", err.Error())
		os.Exit(1)
	}
}

// startMoves follows the moves of keys published in plan, and hands the
// pod's keys off when h says how and a preStop hook asks; it returns what
// tells whether the pod is leaving, which the endpoint answers peers.
func startMoves(ctx context.Context, c discovery.Config, plan string, peers memcachedconn.Files, moveRate int, h handOff, listen string) (func() bool, error) {
	f, err := follower(c, plan, peers, moveRate, listen)
	if err != nil {
		return nil, err
	}
	go f.Run(ctx)
	if h.dir != "" {
		l, err := h.leaver(f, c.Membership)
		if err != nil {
			return nil, fmt.Errorf("handing keys off: %w", err)
		}
		go l.Run(ctx)
	}
	return f.Leaving, nil
}

// handOff is what a hand-off is told on the command line.
type handOff struct {
	dir, ring, await            string
	clientPoll, publicationWait time.Duration
}

// bind defines h's flags.
func (h *handOff) bind() {
	flag.StringVar(&h.dir, "hand-off-dir", "", "Directory shared with the pod's preStop hooks: when one writes its leaving file, this pod's keys are handed to the membership without its slot (with --plan); empty: not.")
	flag.StringVar(&h.ring, "ring", "", "The clients' hash (libmemcached or node), for a hand-off.")
	flag.DurationVar(&h.clientPoll, "client-poll", time.Minute, "How often the clients poll the endpoint, for a hand-off.")
	flag.DurationVar(&h.publicationWait, "publication-wait", 60*time.Second, "How long a hand-off waits, once its keys are copied, for a peer to serve the membership without this slot before it takes the copies back.")
	flag.StringVar(&h.await, "await-hand-off", "", "Ask the running discovery container to hand the pod's keys off through this directory, wait until it has, and exit (the preStop hook).")
}

// leaver hands this pod's keys off when a preStop hook asks, with f's
// mover, to the peers f asks.
func (h handOff) leaver(f *move.Follower, membership string) (*move.Leaver, error) {
	if _, err := ring.New(ring.Hash(h.ring), []string{"localhost:11211"}); err != nil {
		return nil, err
	}
	return &move.Leaver{
		Follower: f, MembershipFile: membership, Ring: ring.Hash(h.ring), ClientPoll: h.clientPoll,
		PublicationWait: h.publicationWait, Dir: h.dir,
	}, nil
}

// follower does this pod's part of each move of keys published in plan, as
// far as c's seal vouches for it, reaching memcacheds through peers at
// most moveRate keys a second, and asking the peers' endpoints, which
// listen as this one does, whether they are leaving.
func follower(c discovery.Config, plan string, peers memcachedconn.Files, moveRate int, listen string) (*move.Follower, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("reading the host name: %w", err)
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("the endpoint's address %q: %w", listen, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("the endpoint's port %q: %w", port, err)
	}
	return &move.Follower{
		Mover: &move.Mover{
			Dial:  func(ctx context.Context, address string) (net.Conn, error) { return peers.Dial(ctx, address) },
			Limit: rate.NewLimiter(rate.Limit(moveRate), 100),
		},
		DialPeer:     peers.DialPeer,
		EndpointPort: p,
		PlanFile:     plan,
		SealFile:     c.Seal,
		Host:         host,
		Local:        c.Memcached,
		Log:          c.Log,
	}, nil
}
