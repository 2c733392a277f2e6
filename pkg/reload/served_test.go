//go:build integration

package reload_test

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/internal/testsupport/testcerts"
	"github.com/example/memcached-operator/pkg/material"
	"github.com/example/memcached-operator/pkg/reload"
)

// servedDir is an empty served directory, as the pod's memory volume is:
// writable by the reloader, readable by memcached's user (nobody here) by
// its group, which the files it gets inherit.
func servedDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(filesDir(t), "served")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.Atoi(nobody.Gid)
	if err := os.Chown(dir, 0, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o750|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tlsArgs are memcached's TLS options reading dir, verifying clients when
// verify.
func tlsArgs(dir string, verify bool) []string {
	opts := "ssl_chain_cert=" + filepath.Join(dir, material.CertKey) + ",ssl_key=" + filepath.Join(dir, material.KeyKey)
	if verify {
		opts += ",ssl_ca_cert=" + filepath.Join(dir, material.CAKey) + ",ssl_verify_mode=2"
	}
	return []string{"--enable-ssl", "--extended=" + opts}
}

// Any client may send refresh_certs. memcached reading the mounted files
// then loads whatever the kubelet placed there, checked or not: a key that
// is not the certificate's breaks every handshake after. Reading the
// served directory instead, it loads only what the reloader passed.
func TestAClientsRefreshCertsLoadsOnlyCheckedFiles(t *testing.T) {
	ca := newCA(t, "ca")
	first, second := issue(t, ca, "first"), issue(t, ca, "second")
	mismatched := testcerts.Pair{Cert: second.Cert, Key: first.Key}

	t.Run("memcached reading the mounted files", func(t *testing.T) {
		mounted := filesDir(t)
		writePair(t, mounted, first, nil)
		m := startMemcached(t, mounted, tlsArgs(mounted, false)...)
		writePair(t, mounted, mismatched, nil)
		conn, rd := client(t, m.addr, true, nil, "")
		t.Logf("refresh_certs with a mismatched key mounted: %q", roundTrip(t, conn, rd, "refresh_certs\r\n"))
		// The control: memcached took the unchecked files, and now fails
		// every handshake.
		c, err := tls.Dial("tcp", m.addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test reads which certificate is served
		if err == nil {
			c.Close()
			t.Fatalf("memcached still serves: refresh_certs no longer loads unchecked files, and this test proves nothing")
		}
		t.Logf("a new connection after it: %v", err)
	})

	mounted, served := filesDir(t), servedDir(t)
	writePair(t, mounted, first, nil)
	c := reload.Config{TLSDir: mounted, ServedDir: served, Timeout: 3 * time.Second}
	if err := reload.Prepare(c, time.Now()); err != nil {
		t.Fatal(err)
	}
	m := startMemcached(t, served, tlsArgs(served, false)...)
	c.Address = m.addr
	r, err := reload.New(c)
	if err != nil {
		t.Fatal(err)
	}
	writePair(t, mounted, mismatched, nil)
	if err := r.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	conn, rd := client(t, m.addr, true, nil, "")
	if got := roundTrip(t, conn, rd, "refresh_certs\r\n"); got != "OK" {
		t.Fatalf("refresh_certs: %q", got)
	}
	if got, want := servedSerial(t, m.addr, nil), serialOf(t, first); got != want {
		t.Errorf("after a client's refresh_certs memcached serves serial %s, want the checked %s", got, want)
	}
	// A fit change is served, through the same directory.
	writePair(t, mounted, second, nil)
	if err := r.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := servedSerial(t, m.addr, nil), serialOf(t, second); got != want {
		t.Errorf("after a fit change memcached serves serial %s, want %s", got, want)
	}
}

// Unfit files stop the pod before memcached starts (the init container),
// and say why.
func TestPrepareRefusesUnfitFiles(t *testing.T) {
	ca := newCA(t, "ca")
	first, second := issue(t, ca, "first"), issue(t, ca, "second")
	mounted, served := filesDir(t), servedDir(t)
	writePair(t, mounted, testcerts.Pair{Cert: second.Cert, Key: first.Key}, nil)
	err := reload.Prepare(reload.Config{TLSDir: mounted, ServedDir: served}, time.Now())
	if err == nil || !strings.Contains(err.Error(), "not fit to serve") {
		t.Fatalf("want the mismatched key refused, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(served, material.CertKey)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("nothing is published: %v", err)
	}
	authDir := filesDir(t)
	write(t, authDir, "authfile", []byte("alice:one")) // no newline: memcached ignores the line
	err = reload.Prepare(reload.Config{AuthFile: filepath.Join(authDir, "authfile"), ServedDir: served}, time.Now())
	if err == nil || !strings.Contains(err.Error(), "newline") {
		t.Fatalf("want the authentication file refused, got %v", err)
	}

	// Later, an unfit change is not published either: memcached keeps
	// the file it has.
	write(t, authDir, "authfile", []byte("alice:one\n"))
	c := reload.Config{AuthFile: filepath.Join(authDir, "authfile"), ServedDir: served, Signal: func() error { return nil }}
	if err := reload.Prepare(c, time.Now()); err != nil {
		t.Fatal(err)
	}
	r, err := reload.New(c)
	if err != nil {
		t.Fatal(err)
	}
	write(t, authDir, "authfile", []byte("alice:one\nbob"))
	if err := r.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(served, "authfile")); string(got) != "alice:one\n" {
		t.Errorf("served authentication file %q, want the fit one kept", got)
	}
}

// The reloader's memory is the served directory, which outlives it in the
// pod: restarted, it knows what memcached loaded, not what is mounted now.
// A file changed while it was down is loaded; content memcached failed to
// load in place is not tried again, nor does the reloader exit again for
// it (no crash loop: the operator restarts the pods once for it).
func TestARestartedReloaderRemembers(t *testing.T) {
	authDir, served := filesDir(t), servedDir(t)
	authFile := filepath.Join(authDir, "authfile")
	write(t, authDir, "authfile", []byte("alice:one\nbob:two\n"))
	c := reload.Config{AuthFile: authFile, ServedDir: served, Timeout: 3 * time.Second}
	if err := reload.Prepare(c, time.Now()); err != nil {
		t.Fatal(err)
	}
	m := startMemcached(t, served, "--auth-file="+filepath.Join(served, "authfile"))
	c.Address, c.Signal = m.addr, signal(m.cmd.Process.Pid)
	if _, err := reload.New(c); err != nil {
		t.Fatal(err)
	}

	t.Run("a file changed while it was down is loaded", func(t *testing.T) {
		// Bob's password revoked while no reloader ran.
		write(t, authDir, "authfile", []byte("alice:one\n"))
		r, err := reload.New(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Check(context.Background()); err != nil {
			t.Fatal(err)
		}
		conn, rd := client(t, m.addr, false, nil, "")
		if got := roundTrip(t, conn, rd, "set auth 0 0 7\r\nbob two\r\n"); !strings.HasPrefix(got, "CLIENT_ERROR") {
			t.Errorf("bob, revoked while the reloader was down, logs in: %q", got)
		}
	})

	t.Run("a failed reload is not tried again after a restart", func(t *testing.T) { expectAFailedReloadNotTriedAgain(t, c, authDir) })
}

// A ca.crt that drops a CA fails the reload (memcached cannot stop
// trusting a CA in place), and keeps failing through the reloader's
// restarts until memcached restarts: the reduced ca.crt is not served
// before, so a restarted reloader, which takes the served files as
// loaded, sees the removal again rather than take it as done.
func TestACARemovalIsToldUntilMemcachedRestarts(t *testing.T) {
	ca1, ca2 := newCA(t, "ca1"), newCA(t, "ca2")
	first := issue(t, ca2, "first")
	both := append(append([]byte{}, ca1.PEM...), ca2.PEM...)
	mounted, served := filesDir(t), servedDir(t)
	writePair(t, mounted, first, both)
	c := reload.Config{TLSDir: mounted, ServedDir: served, ClientCertificate: true, Timeout: 3 * time.Second}
	if err := reload.Prepare(c, time.Now()); err != nil {
		t.Fatal(err)
	}
	m := startMemcached(t, served, tlsArgs(served, true)...)
	c.Address = m.addr
	writePair(t, mounted, first, ca2.PEM)
	for restart := range 3 {
		r, err := reload.New(c)
		if err != nil {
			t.Fatal(err)
		}
		var f *reload.Failure
		if err := r.Check(context.Background()); !errors.As(err, &f) || !strings.Contains(err.Error(), "ca.crt no longer holds CN=ca1") {
			t.Fatalf("after %d restarts of the reloader: %v, want the CA removal told", restart, err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(served, material.CAKey)); string(got) != string(both) {
		t.Errorf("the served ca.crt lost a CA memcached still trusts")
	}
}

// expectAFailedReloadNotTriedAgain: a reload of the authentication file of
// authDir that fails is not tried again by a restarted reloader of c, and
// new content is.
func expectAFailedReloadNotTriedAgain(t *testing.T, c reload.Config, authDir string) {
	sent := 0
	c.Signal = func() error { sent++; return nil } // memcached never told: the reload fails
	r, err := reload.New(c)
	if err != nil {
		t.Fatal(err)
	}
	write(t, authDir, "authfile", []byte("carol:three\n"))
	var f *reload.Failure
	if err := r.Check(context.Background()); !errors.As(err, &f) {
		t.Fatalf("want a Failure, got %v", err)
	}
	for range 3 {
		r, err := reload.New(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Check(context.Background()); err != nil {
			t.Fatalf("restarted, the reloader fails again on the same content: %v", err)
		}
	}
	if sent != 1 {
		t.Errorf("memcached was told %d times, want once", sent)
	}
	// New content is tried.
	write(t, authDir, "authfile", []byte("dave:four\n"))
	r, err = reload.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Check(context.Background()); !errors.As(err, &f) || sent != 2 {
		t.Errorf("new content after a failure: want it tried (and fail here), got %v after %d signals", err, sent)
	}
}
