package reload

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/example/memcached-operator/pkg/memcachedconn"
)

// reloadTLS has memcached refresh its certificates, then waits until a
// new handshake shows the leaf certificate of now.
func (r *Reloader) reloadTLS(ctx context.Context, now files) (*x509.Certificate, error) {
	want, err := leaf(now.cert)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.c.Timeout)
	defer cancel()
	var last error
	for {
		served, err := r.refreshCerts(ctx, now)
		switch {
		case err != nil:
			last = err
		case !served.Equal(want):
			last = fmt.Errorf("after refresh_certs memcached still serves %s, not the mounted %s", describe(served), describe(want))
		default:
			return served, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("not confirmed within %s: %w", r.c.Timeout, last)
		case <-time.After(time.Second):
		}
	}
}

// refreshCerts sends refresh_certs on a connection memcached accepts with
// what it loaded, then returns the certificate a new connection is served.
func (r *Reloader) refreshCerts(ctx context.Context, now files) (*x509.Certificate, error) {
	conn, err := r.dial(ctx, r.loaded, r.loaded.auth)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	reply, err := memcachedconn.Command(conn, "refresh_certs\r\n")
	if err != nil {
		return nil, fmt.Errorf("refresh_certs: %w", err)
	}
	if reply != "OK" {
		return nil, fmt.Errorf("refresh_certs: memcached answered %q", reply)
	}
	// A new connection, presenting the new client certificate: the
	// handshake is the one every client now gets.
	check, err := r.dial(ctx, now, r.loaded.auth)
	if err != nil {
		return nil, fmt.Errorf("after refresh_certs: %w", err)
	}
	defer check.Close()
	// With TLS 1.3 a client certificate memcached refuses shows only on
	// the first read: a command proves the connection is one it serves.
	if reply, err := memcachedconn.Command(check, "version\r\n"); err != nil || !strings.HasPrefix(reply, "VERSION ") {
		return nil, fmt.Errorf("after refresh_certs, a new connection is refused: %q, %v", reply, err)
	}
	state := check.(*tls.Conn).ConnectionState()
	if len(state.PeerCertificates) == 0 {
		return nil, errors.New("after refresh_certs: memcached presented no certificate")
	}
	return state.PeerCertificates[0], nil
}

// reloadAuth signals memcached, then waits until a login tells that it
// reads next: one that next adds must succeed, or else one it removes
// must fail. When next has the same entries, there is nothing to tell.
func (r *Reloader) reloadAuth(ctx context.Context, next []byte) error {
	before, after := memcachedconn.Entries(r.loaded.auth), memcachedconn.Entries(next)
	if err := r.c.Signal(); err != nil {
		return err
	}
	probe, accept := "", false
	for _, e := range after {
		if !slices.Contains(before, e) {
			probe, accept = e, true
			break
		}
	}
	if probe == "" {
		for _, e := range before {
			if !slices.Contains(after, e) {
				probe = e
				break
			}
		}
	}
	if probe == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.c.Timeout)
	defer cancel()
	var last error
	for {
		conn, err := r.dial(ctx, r.loaded, nil)
		if err == nil {
			var ok bool
			ok, err = memcachedconn.Login(conn, probe)
			conn.Close()
			if err == nil && ok == accept {
				return nil
			}
			if err == nil {
				user, _, _ := strings.Cut(probe, ":")
				if accept {
					err = fmt.Errorf("memcached still refuses user %s, whom the new file adds", user)
				} else {
					err = fmt.Errorf("memcached still accepts user %s, whom the new file removes", user)
				}
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("not confirmed within %s: %w", r.c.Timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// dial connects to memcached, over TLS with the client certificate of f
// when there is TLS, and logs in with the first entry of auth, if any.
func (r *Reloader) dial(ctx context.Context, f files, auth []byte) (net.Conn, error) {
	m := memcachedconn.Material{TLS: r.c.TLSDir != "", Auth: auth}
	if r.c.ClientCertificate {
		m.CertPEM, m.KeyPEM = f.cert, f.key
	}
	o, err := m.Options(r.c.Address)
	if err != nil {
		return nil, err
	}
	return memcachedconn.Dial(ctx, o)
}

// signalMemcached sends SIGHUP to the pod's memcached process, found by
// its name in /proc: the pod shares one process namespace, and the
// reloader runs as memcached's user, so no capability is needed.
func signalMemcached() error {
	pid, err := findProcess("/proc", "memcached")
	if err != nil {
		return err
	}
	return syscall.Kill(pid, syscall.SIGHUP)
}

func findProcess(proc, name string) (int, error) {
	dirs, err := os.ReadDir(proc)
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(proc, d.Name(), "comm"))
		if err == nil && string(bytes.TrimSpace(comm)) == name {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no %s process is visible: the pod must share its process namespace", name)
}
