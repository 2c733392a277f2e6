//go:build integration

package reload_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/pkg/material"

	"github.com/example/memcached-operator/internal/testsupport/testcerts"
	"github.com/example/memcached-operator/pkg/reload"
)

// These tests run memcached itself (Debian's package, which the real node's
// image is made of; make node-packages installs it): what memcached does on
// refresh_certs and SIGHUP is memcached's behaviour, not the reloader's.

type server struct {
	addr string
	dir  string
	cmd  *exec.Cmd
}

func TestANewCertificateIsServedWithoutARestartAndTheKeysStay(t *testing.T) {
	dir := filesDir(t)
	ca := newCA(t, "ca")
	first, second := issue(t, ca, "first"), issue(t, ca, "second")
	writePair(t, dir, first, nil)
	m := startMemcached(t, dir, "--enable-ssl", "--extended=ssl_chain_cert="+filepath.Join(dir, material.CertKey)+",ssl_key="+filepath.Join(dir, material.KeyKey))

	conn, rd := client(t, m.addr, true, nil, "")
	kept := storeKeys(t, conn, rd, 100)
	r, err := reload.New(reload.Config{Address: m.addr, TLSDir: dir, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Check(context.Background()); err != nil {
		t.Fatalf("with nothing new: %v", err)
	}
	if got, want := servedSerial(t, m.addr, nil), serialOf(t, first); got != want {
		t.Fatalf("memcached serves serial %s before the rotation, want %s", got, want)
	}

	writePair(t, dir, second, nil)
	if err := r.Check(context.Background()); err != nil {
		t.Fatalf("reloading: %v", err)
	}
	if got, want := servedSerial(t, m.addr, nil), serialOf(t, second); got != want {
		t.Errorf("memcached serves serial %s after the reload, want the new %s", got, want)
	}
	if n := kept(); n != 100 {
		t.Errorf("memcached holds %d of 100 keys after the reload, on a connection opened before it", n)
	}
	if m.cmd.ProcessState != nil {
		t.Errorf("memcached exited")
	}
}

func TestANewAuthenticationFileIsReadWithoutARestart(t *testing.T) {
	dir := filesDir(t)
	authFile := filepath.Join(dir, "authfile")
	write(t, dir, "authfile", []byte("alice:one\n"))
	m := startMemcached(t, dir, "--auth-file="+authFile)
	conn, rd := client(t, m.addr, false, nil, "alice:one")
	kept := storeKeys(t, conn, rd, 100)

	r, err := reload.New(reload.Config{Address: m.addr, AuthFile: authFile, Timeout: 10 * time.Second, Signal: signal(m.cmd.Process.Pid)})
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "authfile", []byte("bob:two\n"))
	if err := r.Check(context.Background()); err != nil {
		t.Fatalf("reloading: %v", err)
	}
	client(t, m.addr, false, nil, "bob:two")
	c, crd := client(t, m.addr, false, nil, "")
	if got := roundTrip(t, c, crd, "set auth 0 0 9\r\nalice one\r\n"); !strings.HasPrefix(got, "CLIENT_ERROR") {
		t.Errorf("alice, whom the new file removes, logs in: %q", got)
	}
	if n := kept(); n != 100 {
		t.Errorf("memcached holds %d of 100 keys after the reload", n)
	}
}

// With TLS, authentication and client certificates together, both Secrets
// change at once, to a certificate of a new CA that ca.crt adds (the first
// step of a CA's rotation): the reloader logs in with what memcached
// loaded, and presents the new certificate only once memcached trusts it.
// A certificate whose key is not its own is never sent to memcached, which
// would then fail every handshake: memcached keeps serving the one it has.
func TestUnfitFilesAreNotSent(t *testing.T) {
	dir := filesDir(t)
	ca := newCA(t, "ca")
	first, second, other := issue(t, ca, "first"), issue(t, ca, "second"), issue(t, ca, "other")
	writePair(t, dir, first, nil)
	m := startMemcached(t, dir, "--enable-ssl", "--extended=ssl_chain_cert="+filepath.Join(dir, material.CertKey)+",ssl_key="+filepath.Join(dir, material.KeyKey))
	r, err := reload.New(reload.Config{Address: m.addr, TLSDir: dir, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	writePair(t, dir, testcerts.Pair{Cert: second.Cert, Key: other.Key}, nil)
	if err := r.Check(context.Background()); err != nil {
		t.Fatalf("unfit files: %v", err)
	}
	if got, want := servedSerial(t, m.addr, nil), serialOf(t, first); got != want {
		t.Errorf("memcached serves serial %s, want the one it had, %s", got, want)
	}
	// Fixed: the next look reloads.
	writePair(t, dir, second, nil)
	if err := r.Check(context.Background()); err != nil {
		t.Fatalf("reloading: %v", err)
	}
	if got, want := servedSerial(t, m.addr, nil), serialOf(t, second); got != want {
		t.Errorf("memcached serves serial %s after the fix, want %s", got, want)
	}
}

func TestBothSecretsChangeAtOnceWithClientCertificates(t *testing.T) {
	dir := filesDir(t)
	authFile := filepath.Join(dir, "authfile")
	ca1, ca2 := newCA(t, "ca1"), newCA(t, "ca2")
	first, second := issue(t, ca1, "first"), issue(t, ca2, "second")
	writePair(t, dir, first, ca1.PEM)
	write(t, dir, "authfile", []byte("alice:one\n"))
	m := startMemcached(t, dir, "--auth-file="+authFile, "--enable-ssl",
		"--extended=ssl_chain_cert="+filepath.Join(dir, material.CertKey)+",ssl_key="+filepath.Join(dir, material.KeyKey)+
			",ssl_ca_cert="+filepath.Join(dir, material.CAKey)+",ssl_verify_mode=2")
	conn, rd := client(t, m.addr, true, &first, "alice:one")
	kept := storeKeys(t, conn, rd, 50)

	r, err := reload.New(reload.Config{Address: m.addr, TLSDir: dir, ClientCertificate: true, AuthFile: authFile,
		Timeout: 10 * time.Second, Signal: signal(m.cmd.Process.Pid)})
	if err != nil {
		t.Fatal(err)
	}
	writePair(t, dir, second, append(append([]byte{}, ca1.PEM...), ca2.PEM...))
	write(t, dir, "authfile", []byte("bob:two\n"))
	if err := r.Check(context.Background()); err != nil {
		t.Fatalf("reloading: %v", err)
	}
	if got, want := servedSerial(t, m.addr, &second), serialOf(t, second); got != want {
		t.Errorf("memcached serves serial %s, want the new %s", got, want)
	}
	client(t, m.addr, true, &second, "bob:two")
	if n := kept(); n != 50 {
		t.Errorf("memcached holds %d of 50 keys after the reload", n)
	}
}

// A reload memcached does not take is a Failure: here memcached verifies
// clients, and the new certificate is of a CA that the new ca.crt does not
// hold, so the handshake that would confirm the reload is refused.
func TestAReloadThatCannotBeConfirmedFails(t *testing.T) {
	dir := filesDir(t)
	ca1, ca2 := newCA(t, "ca1"), newCA(t, "ca2")
	first, foreign := issue(t, ca1, "first"), issue(t, ca2, "foreign")
	writePair(t, dir, first, ca1.PEM)
	m := startMemcached(t, dir, "--enable-ssl",
		"--extended=ssl_chain_cert="+filepath.Join(dir, material.CertKey)+",ssl_key="+filepath.Join(dir, material.KeyKey)+
			",ssl_ca_cert="+filepath.Join(dir, material.CAKey)+",ssl_verify_mode=2")
	r, err := reload.New(reload.Config{Address: m.addr, TLSDir: dir, ClientCertificate: true, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	writePair(t, dir, foreign, ca1.PEM)
	err = r.Check(context.Background())
	var f *reload.Failure
	if !errors.As(err, &f) || f.What != "certificate" {
		t.Fatalf("want a Failure of the certificate, got %v", err)
	}
	t.Logf("the failure reads: %v", err)

	// The authentication file's reload is confirmed, not assumed: a
	// memcached that is never told fails it.
	authDir := filesDir(t)
	authFile := filepath.Join(authDir, "authfile")
	write(t, authDir, "authfile", []byte("alice:one\n"))
	a := startMemcached(t, authDir, "--auth-file="+authFile)
	r, err = reload.New(reload.Config{Address: a.addr, AuthFile: authFile, Timeout: 3 * time.Second, Signal: func() error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	write(t, authDir, "authfile", []byte("bob:two\n"))
	err = r.Check(context.Background())
	if !errors.As(err, &f) || f.What != "authentication file" || !strings.Contains(err.Error(), "still refuses user bob") {
		t.Fatalf("want a Failure of the authentication file naming bob, got %v", err)
	}
}
