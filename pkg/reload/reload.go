// Package reload renews, without a restart, what memcached serves from the
// Secrets its pod mounts: it runs beside memcached in the pod, looks at the
// mounted files, and when the kubelet has placed new ones tells memcached
// to load them and checks that it did.
//
//   - A new certificate: the refresh_certs command, then a new TLS handshake
//     must show the mounted certificate (memcached 1.6 reloads its
//     certificate, key and CA on that command, and on nothing else).
//   - A new authentication file: SIGHUP, on which memcached 1.6 reads the
//     file again (on its next one-second clock tick), then a login with a
//     user the new file adds must succeed, or one it removes must fail.
//
// A reload not confirmed within Config.Timeout is a *Failure: the pod then
// says so (cmd/reloader makes it the container's termination message) and
// the operator restarts the pods instead.
package reload

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The files of the mounted Secrets, as the operator names them.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
	CAFile   = "ca.crt"
)

// Config says what to reload and how.
type Config struct {
	// Address is memcached's address from inside the pod (localhost:port).
	Address string
	// TLSDir holds CertFile, KeyFile and, when memcached verifies clients,
	// CAFile. Empty: memcached serves no TLS.
	TLSDir string
	// ClientCertificate: memcached asks clients for a certificate, and the
	// reloader presents the mounted one (as the exporter does).
	ClientCertificate bool
	// ServerName is the name clients verify memcached's certificate for;
	// a certificate that does not carry it is not loaded. Empty: not checked.
	ServerName string
	// AuthFile is memcached's authentication file. Empty: none.
	AuthFile string
	// Interval is how often the mounted files are read.
	Interval time.Duration
	// Timeout bounds a reload, from seeing new files to confirming that
	// memcached uses them.
	Timeout time.Duration
	// Signal tells memcached to read its authentication file again; nil:
	// SIGHUP to the memcached process of the pod (SignalMemcached).
	Signal func() error
	// Log receives one record per reload.
	Log *slog.Logger
}

// FailedExitCode is the reloader's exit code when a reload was not
// confirmed in time (a Failure); its termination message then says why.
const FailedExitCode = 3

// Failure is a reload that was not confirmed in time.
type Failure struct {
	// What is "certificate" or "authentication file".
	What string
	Err  error
}

func (f *Failure) Error() string {
	return fmt.Sprintf("memcached did not load the new %s: %v", f.What, f.Err)
}

func (f *Failure) Unwrap() error { return f.Err }

// files is one reading of the mounted files.
type files struct {
	cert, key, ca []byte
	auth          []byte
}

func (f files) tlsDigest() string  { return digest(f.cert, f.key, f.ca) }
func (f files) authDigest() string { return digest(f.auth) }

func digest(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Reloader follows the mounted files of one pod.
type Reloader struct {
	c Config
	// loaded is what memcached was last seen (or assumed at start) to use.
	loaded files
	// refused is the digest of the TLS files last found unfit, not sent to
	// memcached: told once, not every Interval.
	refused string
}

// New returns a Reloader that takes the files mounted now as those
// memcached loaded when it started.
func New(c Config) (*Reloader, error) {
	if c.TLSDir == "" && c.AuthFile == "" {
		return nil, errors.New("nothing to reload: neither a TLS directory nor an authentication file")
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Signal == nil {
		c.Signal = SignalMemcached
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{c: c}
	f, err := r.read()
	if err != nil {
		return nil, err
	}
	r.loaded = f
	return r, nil
}

// Run looks at the files every Interval and reloads what changed, until
// ctx ends (nil) or a reload fails (a *Failure).
func (r *Reloader) Run(ctx context.Context) error {
	t := time.NewTicker(r.c.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := r.Check(ctx); err != nil {
			var f *Failure
			if errors.As(err, &f) {
				return err
			}
			// A file between two writes of the kubelet, or not there yet:
			// the next look sees it whole.
			r.c.Log.Warn("cannot read the mounted files", "error", err.Error())
		}
	}
}

// Check reloads what changed since the last look, once: a *Failure when
// memcached does not take it within Timeout, another error when the files
// cannot be read.
func (r *Reloader) Check(ctx context.Context) error {
	now, err := r.read()
	if err != nil {
		return err
	}
	if r.c.AuthFile != "" && now.authDigest() != r.loaded.authDigest() {
		start := time.Now()
		if err := r.reloadAuth(ctx, now.auth); err != nil {
			return &Failure{What: "authentication file", Err: err}
		}
		r.loaded.auth = now.auth
		r.c.Log.Info("memcached loaded the new authentication file", "took", time.Since(start).String())
	}
	if r.c.TLSDir != "" && now.tlsDigest() != r.loaded.tlsDigest() && now.tlsDigest() != r.refused {
		// memcached 1.6.18 given a key that is not its certificate's on
		// refresh_certs fails every handshake after: unfit files are never
		// sent. The operator reports the Secret as invalid.
		if err := fit(now, r.c.ServerName, time.Now()); err != nil {
			r.refused = now.tlsDigest()
			r.c.Log.Warn("the mounted certificate is not fit to serve; memcached keeps the one it has", "error", err.Error())
			return nil
		}
		start := time.Now()
		leaf, err := r.reloadTLS(ctx, now)
		if err != nil {
			return &Failure{What: "certificate", Err: err}
		}
		r.loaded.cert, r.loaded.key, r.loaded.ca = now.cert, now.key, now.ca
		r.c.Log.Info("memcached serves the new certificate", "serial", leaf.SerialNumber.String(),
			"notAfter", leaf.NotAfter.UTC().Format(time.RFC3339), "took", time.Since(start).String())
	}
	return nil
}

func (r *Reloader) read() (files, error) {
	var f files
	var err error
	if d := r.c.TLSDir; d != "" {
		if f.cert, err = os.ReadFile(filepath.Join(d, CertFile)); err != nil {
			return f, err
		}
		if f.key, err = os.ReadFile(filepath.Join(d, KeyFile)); err != nil {
			return f, err
		}
		if f.ca, err = os.ReadFile(filepath.Join(d, CAFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return f, err
		}
	}
	if r.c.AuthFile != "" {
		if f.auth, err = os.ReadFile(r.c.AuthFile); err != nil {
			return f, err
		}
	}
	return f, nil
}

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
	reply, err := command(conn, "refresh_certs\r\n")
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
	if reply, err := command(check, "version\r\n"); err != nil || !strings.HasPrefix(reply, "VERSION ") {
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
	before, after := entries(r.loaded.auth), entries(next)
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
			ok, err = login(conn, probe)
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
	d := &net.Dialer{Timeout: 5 * time.Second}
	var conn net.Conn
	var err error
	if r.c.TLSDir == "" {
		conn, err = d.DialContext(ctx, "tcp", r.c.Address)
	} else {
		cfg := &tls.Config{
			MinVersion: tls.VersionTLS12,
			// The connection never leaves the pod, and the certificate
			// names the Service, not localhost: what is checked is which
			// certificate memcached serves, byte for byte.
			InsecureSkipVerify: true, //nolint:gosec // compared with the mounted certificate instead
		}
		if r.c.ClientCertificate {
			pair, perr := tls.X509KeyPair(f.cert, f.key)
			if perr != nil {
				return nil, fmt.Errorf("the client certificate: %w", perr)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		td := &tls.Dialer{NetDialer: d, Config: cfg}
		conn, err = td.DialContext(ctx, "tcp", r.c.Address)
	}
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if es := entries(auth); len(es) > 0 {
		ok, err := login(conn, es[0])
		if err == nil && !ok {
			err = errors.New("memcached refuses the first user of the authentication file it loaded")
		}
		if err != nil {
			conn.Close()
			return nil, err
		}
	}
	return conn, nil
}

// login sends memcached's ASCII authentication for entry (user:password).
func login(conn net.Conn, entry string) (bool, error) {
	user, password, _ := strings.Cut(entry, ":")
	token := user + " " + password
	reply, err := command(conn, "set auth 0 0 "+strconv.Itoa(len(token))+"\r\n"+token+"\r\n")
	if err != nil {
		return false, fmt.Errorf("authentication: %w", err)
	}
	switch {
	case reply == "STORED":
		return true, nil
	case strings.HasPrefix(reply, "CLIENT_ERROR"):
		return false, nil
	}
	return false, fmt.Errorf("authentication: memcached answered %q", reply)
}

// command sends req and reads memcached's one-line reply.
func command(conn net.Conn, req string) (string, error) {
	if _, err := conn.Write([]byte(req)); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// entries are the user:password lines of an authentication file, as
// memcached reads them.
func entries(b []byte) []string {
	var out []string
	for line := range strings.SplitSeq(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}

// fit tells whether memcached can load f's certificate, key and CA, and
// should: a certificate not valid at now, or not for serverName, would
// fail every client that verifies it, where the one memcached serves may
// not. The operator reports such a Secret as invalid.
func fit(f files, serverName string, now time.Time) error {
	pair, err := tls.X509KeyPair(f.cert, f.key)
	if err != nil {
		return err
	}
	if len(f.ca) > 0 && !x509.NewCertPool().AppendCertsFromPEM(f.ca) {
		return errors.New("ca.crt holds no certificate")
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return err
	}
	switch {
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("the certificate is not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	case !now.Before(leaf.NotAfter):
		return fmt.Errorf("the certificate expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if serverName != "" {
		if err := leaf.VerifyHostname(serverName); err != nil {
			return err
		}
	}
	return nil
}

// leaf is the first certificate of a PEM chain.
func leaf(chain []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, chain = pem.Decode(chain)
		if block == nil {
			return nil, errors.New("the mounted tls.crt holds no certificate")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

func describe(c *x509.Certificate) string {
	return fmt.Sprintf("certificate serial %s (not after %s)", c.SerialNumber, c.NotAfter.UTC().Format(time.RFC3339))
}

// SignalMemcached sends SIGHUP to the pod's memcached process, found by
// its name in /proc: the pod shares one process namespace, and the
// reloader runs as memcached's user, so no capability is needed.
func SignalMemcached() error {
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
