// Command discovery runs beside memcached in a Memcached's pod and serves
// the Memcached's membership as AWS ElastiCache's auto discovery does
// (config get cluster), from a file the operator publishes (a ConfigMap
// the pod mounts); a connection that starts with memcached's own commands
// is handed to the pod's memcached (package discovery).
//
// It makes no request to the apiserver: every pod serves the same file,
// so the endpoint answers while any pod does, with or without the
// operator.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/example/memcached-operator/pkg/discovery"
)

func main() {
	var (
		c                 discovery.Config
		listen, tlsDir    string
		clientCertificate bool
	)
	flag.StringVar(&listen, "listen", ":11212", "Address clients reach the endpoint on.")
	flag.StringVar(&c.Membership, "membership", "/etc/memcached/membership/cluster", "File holding the membership the operator publishes.")
	flag.StringVar(&c.Memcached, "memcached-address", "localhost:11211", "memcached's address in the pod.")
	flag.StringVar(&tlsDir, "tls-dir", "", "Directory of the tls.crt, tls.key and ca.crt memcached serves: the endpoint serves them, and reaches memcached over TLS; empty: no TLS.")
	flag.BoolVar(&clientCertificate, "client-certificate", false, "Ask clients for a certificate of ca.crt, as memcached does, and present tls.crt to memcached.")
	flag.BoolVar(&c.Auth, "auth", false, "memcached requires a login, which clients must pass before the endpoint answers.")
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
	if err := discovery.New(c).Serve(ctx, ln); err != nil {
		log.Error("serving failed", "error", err.Error())
		stop()
		os.Exit(1)
	}
}
