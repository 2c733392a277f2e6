package discovery

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/example/memcached-operator/pkg/material"
	"github.com/example/memcached-operator/pkg/memcachedconn"
)

// ServedTLS is the endpoint's TLS: the certificate and key memcached
// serves, read from dir (the pod's served directory, which holds only
// checked files), so that the endpoint serves a rotation when memcached
// does. They are parsed again only when the files change (their size or
// time), not at each handshake. With clientCertificates, a client must
// present a certificate of dir's ca.crt, as memcached asks of it.
func ServedTLS(dir string, clientCertificates bool) *tls.Config {
	var mu sync.Mutex
	var cached *tls.Config
	var cachedFor string
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			files := []string{material.CertKey, material.KeyKey}
			if clientCertificates {
				files = append(files, material.CAKey)
			}
			version := ""
			for _, f := range files {
				fi, err := os.Stat(filepath.Join(dir, f))
				if err != nil {
					return nil, fmt.Errorf("the served %s: %w", f, err)
				}
				version += fmt.Sprintf("%s:%d:%d ", f, fi.Size(), fi.ModTime().UnixNano())
			}
			mu.Lock()
			defer mu.Unlock()
			if cached != nil && cachedFor == version {
				return cached, nil
			}
			c, err := servedConfig(dir, clientCertificates)
			if err != nil {
				return nil, err
			}
			cached, cachedFor = c, version
			return c, nil
		},
	}
}

// servedConfig is the endpoint's TLS configuration from the files dir
// holds now.
func servedConfig(dir string, clientCertificates bool) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, material.CertKey), filepath.Join(dir, material.KeyKey))
	if err != nil {
		return nil, fmt.Errorf("the served certificate: %w", err)
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if clientCertificates {
		ca, err := os.ReadFile(filepath.Join(dir, material.CAKey))
		if err != nil {
			return nil, fmt.Errorf("the served CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, errors.New("the served ca.crt holds no certificate")
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// DialServedTLS connects to memcached over TLS, as the pod's other
// containers do: the connection never leaves the pod, and the certificate
// names the Service, not localhost, so it is not verified; with
// clientCertificate, it presents the served certificate and key (which
// memcached, verifying clients, accepts: the operator checks that the
// certificate allows client authentication). The files are read at each
// connection, so a rotation is followed.
func DialServedTLS(dir string, clientCertificate bool) func(ctx context.Context, address string) (net.Conn, error) {
	files := memcachedconn.ServedFiles(dir, clientCertificate, "")
	return func(ctx context.Context, address string) (net.Conn, error) {
		conn, err := files.Dial(ctx, address)
		if err != nil {
			return nil, err
		}
		// A client's connection, handed over: no deadline but the
		// client's.
		return conn, conn.SetDeadline(time.Time{})
	}
}
