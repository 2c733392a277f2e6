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
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"golang.org/x/time/rate"

	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/material"
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
		f, err := follower(c, plan, peerDialer{tlsDir: tlsDir, clientCertificate: clientCertificate, authFile: authFile}, moveRate)
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
func follower(c discovery.Config, plan string, peers peerDialer, moveRate int) (*move.Follower, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("reading the host name: %w", err)
	}
	return &move.Follower{
		Mover: &move.Mover{
			Dial:  func(ctx context.Context, address string) (net.Conn, error) { return peers.dial(ctx, address, "") },
			Limit: rate.NewLimiter(rate.Limit(moveRate), 100),
		},
		DialPeer: peers.dial,
		PlanFile: plan,
		SealFile: c.Seal,
		Host:     host,
		Local:    c.Memcached,
		Log:      c.Log,
	}, nil
}

// peerDialer reaches a memcached of the Memcached, this pod's (host empty)
// or the one of the slot whose DNS name is host, as the pod's containers
// reach their own: over TLS when tlsDir is set, presenting the served
// certificate when memcached verifies clients, logged in with the
// authentication file's first entry. Over TLS another pod's memcached
// must prove it is the slot's before anything is sent (peerVerifier);
// without TLS the membership's seal and the NetworkPolicy's egress are
// what keep the keys among the Memcached's pods. The files are read at
// each connection, so a rotation is followed.
type peerDialer struct {
	tlsDir            string
	clientCertificate bool
	authFile          string
}

// dial reaches the memcached at address of the slot whose DNS name is
// host (empty: this pod's own).
func (d peerDialer) dial(ctx context.Context, address, host string) (net.Conn, error) {
	tlsDir, clientCertificate, authFile := d.tlsDir, d.clientCertificate, d.authFile
	o := memcachedconn.Options{Address: address, TLS: tlsDir != ""}
	if o.TLS && host != "" {
		verify, err := peerVerifier(tlsDir, host)
		if err != nil {
			return nil, err
		}
		o.VerifyPeer = verify
	}
	if clientCertificate {
		pair, err := tls.LoadX509KeyPair(filepath.Join(tlsDir, material.CertKey), filepath.Join(tlsDir, material.KeyKey))
		if err != nil {
			return nil, fmt.Errorf("the served certificate: %w", err)
		}
		o.Certificate = &pair
	}
	if authFile != "" {
		b, err := os.ReadFile(authFile)
		if err != nil {
			return nil, err
		}
		if es := memcachedconn.Entries(b); len(es) > 0 {
			o.Login = es[0]
		}
	}
	return memcachedconn.Dial(ctx, o)
}

// peerVerifier accepts the memcached of another slot: every pod of a
// Memcached serves the same Secret's certificate, so a peer presenting the
// one this pod serves is the Memcached's; while a rotation reaches the
// pods one by one, a peer's certificate that ca.crt signs for the slot's
// DNS name (host) is too.
func peerVerifier(tlsDir, host string) (func(tls.ConnectionState) error, error) {
	own, err := os.ReadFile(filepath.Join(tlsDir, material.CertKey))
	if err != nil {
		return nil, fmt.Errorf("the served certificate: %w", err)
	}
	ownLeaf, _ := pem.Decode(own)
	ca, _ := os.ReadFile(filepath.Join(tlsDir, material.CAKey))
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("%s presents no certificate", host)
		}
		leaf := cs.PeerCertificates[0]
		if ownLeaf != nil && bytes.Equal(leaf.Raw, ownLeaf.Bytes) {
			return nil
		}
		pool := x509.NewCertPool()
		if len(ca) == 0 || !pool.AppendCertsFromPEM(ca) {
			return fmt.Errorf("%s presents a certificate other than the served one, and there is no ca.crt to verify it", host)
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: host}); err != nil {
			return fmt.Errorf("%s is not a slot of this Memcached: %w", host, err)
		}
		return nil
	}, nil
}
