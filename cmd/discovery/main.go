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
// what it did in its log.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/time/rate"

	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/memcachedconn"
	"github.com/example/memcached-operator/pkg/move"
)

func main() {
	var (
		c                 discovery.Config
		listen, tlsDir    string
		clientCertificate bool
		plan, authFile    string
		moveRate          int
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
	flag.Parse()

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	c.Log = log
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
		f, err := follower(c, plan, memcachedconn.ServedFiles(tlsDir, clientCertificate, authFile), moveRate)
		if err != nil {
			log.Error("cannot follow the moves of keys", "error", err.Error())
			os.Exit(1)
		}
		go f.Run(ctx)
	}
	if err := discovery.New(c).Serve(ctx, ln); err != nil {
		log.Error("serving failed", "error", err.Error())
		stop()
		os.Exit(1)
	}
}

// follower does this pod's part of each move of keys published in plan, as
// far as c's seal vouches for it, reaching memcacheds through peers at
// most moveRate keys a second.
func follower(c discovery.Config, plan string, peers memcachedconn.Files, moveRate int) (*move.Follower, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("reading the host name: %w", err)
	}
	return &move.Follower{
		Mover: &move.Mover{
			Dial:  func(ctx context.Context, address string) (net.Conn, error) { return peers.Dial(ctx, address) },
			Limit: rate.NewLimiter(rate.Limit(moveRate), 100),
		},
		DialPeer: peers.DialPeer,
		PlanFile: plan,
		SealFile: c.Seal,
		Host:     host,
		Local:    c.Memcached,
		Log:      c.Log,
	}, nil
}
