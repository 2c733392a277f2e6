//go:build integration

package discovery_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/internal/testsupport/memcachedproc"
	"github.com/example/memcached-operator/internal/testsupport/testcerts"
	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/material"
)

// With TLS, client certificates and authentication, the endpoint asks of
// a client what memcached asks: a certificate of the CA, then a login,
// which memcached judges; the data commands then reach memcached on the
// connection the login was checked on, which the endpoint opens over TLS
// with the pod's own certificate, as memcached requires of every client.
func TestTheEndpointAsksWhatMemcachedAsks(t *testing.T) {
	e, client, stranger := startEndpointAskingWhatMemcachedAsks(t)
	connect := e.connect
	t.Run("a certificate of another CA", func(t *testing.T) {
		conn, r := connect(t, &stranger)
		conn.Write([]byte("version\r\n"))
		if line, err := r.ReadString('\n'); err == nil {
			t.Errorf("answered %q", line)
		}
	})
	t.Run("no login", func(t *testing.T) {
		conn, r := connect(t, &client)
		if got := exchange(t, conn, r, "config get cluster\r\n", oneLine); got != "CLIENT_ERROR unauthenticated\r\n" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("a wrong password", func(t *testing.T) {
		conn, r := connect(t, &client)
		if got := exchange(t, conn, r, "set auth 0 0 11\r\nalice wrong\r\n", oneLine); !strings.HasPrefix(got, "CLIENT_ERROR") {
			t.Errorf("got %q, want memcached's refusal", got)
		}
		if _, err := r.ReadString('\n'); err == nil {
			t.Error("the connection stayed open")
		}
	})
	t.Run("a login of the most bytes memcached takes, and of more", func(t *testing.T) {
		for _, tt := range []struct {
			n       int
			refused bool
		}{{discovery.MaxLogin, false}, {discovery.MaxLogin + 1, true}, {0, false}, {-1, true}} {
			conn, r := connect(t, &client)
			req := fmt.Sprintf("set auth 0 0 %d\r\n", tt.n)
			switch {
			case tt.n > 0 && !tt.refused:
				req += "alice " + strings.Repeat("x", tt.n-len("alice ")) + "\r\n"
			case tt.n == 0:
				req += "\r\n"
			}
			got := exchange(t, conn, r, req, oneLine)
			if refused := got == "CLIENT_ERROR bad data chunk\r\n"; refused != tt.refused {
				t.Errorf("a login of %d bytes: %q", tt.n, got)
			}
		}
	})
	t.Run("logged in", func(t *testing.T) {
		conn, r := connect(t, &client)
		if got := exchange(t, conn, r, "set auth 0 0 12\r\nalice secret\r\n", oneLine); got != "STORED\r\n" {
			t.Fatalf("login: %q", got)
		}
		if got := exchange(t, conn, r, "config get cluster\r\n", end); !strings.Contains(got, "cache-2.cache.ns.svc|10.0.0.7|11211") {
			t.Errorf("config get cluster: %q", got)
		}
		if got := exchange(t, conn, r, "set k 0 0 2\r\nhi\r\nget k\r\n", end); got != "STORED\r\nVALUE k 0 2\r\nhi\r\nEND\r\n" {
			t.Errorf("data after the login: %q", got)
		}
	})
}

// tlsEndpoint is a discovery endpoint over TLS at addr, whose certificate
// ca signs.
type tlsEndpoint struct {
	addr string
	ca   *testcerts.CA
}

// startEndpointAskingWhatMemcachedAsks starts memcached with TLS, client
// certificates and authentication, and a discovery endpoint in front of
// it, as a pod runs them; with a client certificate of the pods' CA, and
// one of another CA.
func startEndpointAskingWhatMemcachedAsks(t *testing.T) (tlsEndpoint, testcerts.Pair, testcerts.Pair) {
	dir := memcachedproc.FilesDir(t)
	ca, err := testcerts.NewCA("ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testcerts.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	// The server's certificate is the pod's client certificate too, as
	// the operator requires when memcached verifies clients.
	server, err := ca.Issue("server", []string{"cache.ns.svc"}, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue("client", nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := other.Issue("stranger", nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{material.CertKey: server.Cert, material.KeyKey: server.Key, material.CAKey: ca.PEM, "authfile": []byte("alice:secret\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mc := memcachedproc.Start(t, "--auth-file="+filepath.Join(dir, "authfile"), "--enable-ssl",
		"--extended=ssl_chain_cert="+filepath.Join(dir, material.CertKey)+",ssl_key="+filepath.Join(dir, material.KeyKey)+
			",ssl_ca_cert="+filepath.Join(dir, material.CAKey)+",ssl_verify_mode=2")
	path := filepath.Join(dir, "cluster")
	publish(t, path, three)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	srv := discovery.New(discovery.Config{Membership: path, Memcached: mc.Addr, DialMemcached: discovery.DialServedTLS(dir, true),
		Auth: true, CommandTimeout: time.Second})
	go func() { done <- srv.Serve(ctx, tls.NewListener(ln, discovery.ServedTLS(dir, true))) }()
	t.Cleanup(func() { cancel(); <-done })
	return tlsEndpoint{addr: ln.Addr().String(), ca: ca}, client, stranger
}

// connect connects to e presenting p (nil: no certificate).
func (e tlsEndpoint) connect(t *testing.T, p *testcerts.Pair) (net.Conn, *bufio.Reader) {
	t.Helper()
	cfg := &tls.Config{RootCAs: e.ca.Pool(), ServerName: "cache.ns.svc"}
	if p != nil {
		pair, err := p.TLS()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", e.addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn, bufio.NewReader(conn)
}

// The endpoint serves the certificate of the files as they are: parsed
// again once they change, as a rotation changes them.
func TestTheEndpointServesARotatedCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, err := testcerts.NewCA("ca")
	if err != nil {
		t.Fatal(err)
	}
	serve := func(cn string) string {
		p, err := ca.Issue(cn, []string{"cache.ns.svc"}, x509.ExtKeyUsageServerAuth)
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{material.CertKey: p.Cert, material.KeyKey: p.Key} {
			if err := os.WriteFile(filepath.Join(dir, name+".tmp"), b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(dir, name+".tmp"), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		return cn
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsLn := tls.NewListener(ln, discovery.ServedTLS(dir, false))
	t.Cleanup(func() { tlsLn.Close() })
	go func() {
		for {
			c, err := tlsLn.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	served := func() string {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "cache.ns.svc"})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	first := serve("first")
	for range 2 {
		if got := served(); got != first {
			t.Fatalf("served %s, want %s", got, first)
		}
	}
	second := serve("the second, rotated in")
	if got := served(); got != second {
		t.Errorf("served %s after the rotation, want %s", got, second)
	}
}
