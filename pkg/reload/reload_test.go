//go:build integration

package reload_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/example/memcached-operator/pkg/material"

	"github.com/example/memcached-operator/internal/testsupport/memcachedproc"
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

// startMemcached runs memcached with args, its files in dir.
func startMemcached(t *testing.T, dir string, args ...string) *server {
	t.Helper()
	p := memcachedproc.Start(t, args...)
	return &server{addr: p.Addr, dir: dir, cmd: p.Cmd}
}

// filesDir is a directory memcached's user reads.
func filesDir(t *testing.T) string { return memcachedproc.FilesDir(t) }

// write replaces name in dir at once, as the kubelet swaps a Secret volume.
func write(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func writePair(t *testing.T, dir string, p testcerts.Pair, ca []byte) {
	write(t, dir, material.CertKey, p.Cert)
	write(t, dir, material.KeyKey, p.Key)
	if ca != nil {
		write(t, dir, material.CAKey, ca)
	}
}

func issue(t *testing.T, ca *testcerts.CA, cn string, usages ...x509.ExtKeyUsage) testcerts.Pair {
	t.Helper()
	p, err := ca.Issue(cn, []string{"memcached.test.svc"}, usages...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newCA(t *testing.T, cn string) *testcerts.CA {
	t.Helper()
	ca, err := testcerts.NewCA(cn)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// client is a memcached connection: TLS with pair as the client
// certificate when pair is not nil, logged in as user:password when given.
func client(t *testing.T, addr string, useTLS bool, pair *testcerts.Pair, login string) (net.Conn, *bufio.Reader) {
	t.Helper()
	var conn net.Conn
	var err error
	if useTLS {
		cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the test reads which certificate is served
		if pair != nil {
			kp, err := tls.X509KeyPair(pair.Cert, pair.Key)
			if err != nil {
				t.Fatal(err)
			}
			// Presented whatever CAs memcached says it accepts, as a
			// client with a certificate of a CA taken out would.
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &kp, nil }
		}
		conn, err = tls.Dial("tcp", addr, cfg)
	} else {
		conn, err = net.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	rd := bufio.NewReader(conn)
	if login != "" {
		token := strings.Replace(login, ":", " ", 1)
		if got := roundTrip(t, conn, rd, fmt.Sprintf("set auth 0 0 %d\r\n%s\r\n", len(token), token)); got != "STORED" {
			t.Fatalf("login %s: %q", login, got)
		}
	}
	return conn, rd
}

func roundTrip(t *testing.T, conn net.Conn, rd *bufio.Reader, req string) string {
	t.Helper()
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	line, err := rd.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimRight(line, "\r\n")
}

func servedSerial(t *testing.T, addr string, pair *testcerts.Pair) string {
	t.Helper()
	conn, _ := client(t, addr, true, pair, "")
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func serialOf(t *testing.T, p testcerts.Pair) string {
	t.Helper()
	kp, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	x, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return x.SerialNumber.String()
}

// storeKeys stores n keys and returns a function that tells how many of
// them memcached still holds.
func storeKeys(t *testing.T, conn net.Conn, rd *bufio.Reader, n int) func() int {
	t.Helper()
	for i := range n {
		if got := roundTrip(t, conn, rd, fmt.Sprintf("set key%d 0 0 1\r\nv\r\n", i)); got != "STORED" {
			t.Fatalf("set: %q", got)
		}
	}
	return func() int {
		kept := 0
		for i := range n {
			if roundTrip(t, conn, rd, fmt.Sprintf("get key%d\r\n", i)) != "END" {
				kept++
				// VALUE line read: the value and END follow.
				_, _ = rd.ReadString('\n')
				_, _ = rd.ReadString('\n')
			}
		}
		return kept
	}
}

func signal(pid int) func() error {
	return func() error { return syscall.Kill(pid, syscall.SIGHUP) }
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

// servingFirst runs memcached with TLS, serving the certificate first of
// ca from dir, and a reloader of dir that checks the name clients verify.
func servingFirst(t *testing.T) (dir string, ca *testcerts.CA, first testcerts.Pair, m *server, r *reload.Reloader) {
	t.Helper()
	dir = filesDir(t)
	ca = newCA(t, "ca")
	first = issue(t, ca, "first")
	writePair(t, dir, first, nil)
	m = startMemcached(t, dir, "--enable-ssl", "--extended=ssl_chain_cert="+filepath.Join(dir, material.CertKey)+",ssl_key="+filepath.Join(dir, material.KeyKey))
	r, err := reload.New(reload.Config{Address: m.addr, TLSDir: dir, ServerName: "memcached.test.svc", Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return dir, ca, first, m, r
}

// An expired certificate, one not valid yet, and one without the name
// clients verify are not sent either: memcached keeps serving the one it
// has, and the next fit certificate is loaded.
func TestCertificatesClientsWouldRefuseAreNotSent(t *testing.T) {
	dir, ca, first, m, r := servingFirst(t)
	now := time.Now()
	valid := func(cn string, hosts []string, from, to time.Time) testcerts.Pair {
		p, err := ca.IssueValid(cn, hosts, from, to)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, p := range map[string]testcerts.Pair{
		"expired":       valid("expired", []string{"memcached.test.svc"}, now.Add(-48*time.Hour), now.Add(-time.Hour)),
		"not yet valid": valid("future", []string{"memcached.test.svc"}, now.Add(time.Hour), now.Add(48*time.Hour)),
		"another name":  valid("other", []string{"other.test.svc"}, now.Add(-time.Hour), now.Add(48*time.Hour)),
	} {
		writePair(t, dir, p, nil)
		if err := r.Check(context.Background()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got, want := servedSerial(t, m.addr, nil), serialOf(t, first); got != want {
			t.Errorf("%s: memcached serves serial %s, want the one it had, %s", name, got, want)
		}
	}
	second := issue(t, ca, "second")
	writePair(t, dir, second, nil)
	if err := r.Check(context.Background()); err != nil {
		t.Fatalf("reloading: %v", err)
	}
	if got, want := servedSerial(t, m.addr, nil), serialOf(t, second); got != want {
		t.Errorf("memcached serves serial %s after a fit certificate, want %s", got, want)
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

// memcached 1.6.18's refresh_certs adds the CAs of ca.crt to those it
// trusts and removes none: a client certificate of a CA taken out of
// ca.crt still gets in. So a ca.crt that drops a CA is not reloaded in
// place: the reloader fails, naming the CA, and the pods restart.
func TestARemovedCAIsNotReloadedInPlace(t *testing.T) {
	dir := filesDir(t)
	ca1, ca2 := newCA(t, "ca1"), newCA(t, "ca2")
	first, second := issue(t, ca1, "first"), issue(t, ca2, "second")
	both := append(append([]byte{}, ca1.PEM...), ca2.PEM...)
	writePair(t, dir, first, both)
	args := []string{"--enable-ssl", "--extended=ssl_chain_cert=" + filepath.Join(dir, material.CertKey) + ",ssl_key=" + filepath.Join(dir, material.KeyKey) +
		",ssl_ca_cert=" + filepath.Join(dir, material.CAKey) + ",ssl_verify_mode=2"}

	t.Run("memcached keeps trusting a CA that refresh_certs no longer reads", func(t *testing.T) {
		m := startMemcached(t, dir, args...)
		writePair(t, dir, second, ca2.PEM)
		conn, rd := client(t, m.addr, true, &second, "")
		if got := roundTrip(t, conn, rd, "refresh_certs\r\n"); got != "OK" {
			t.Fatalf("refresh_certs: %q", got)
		}
		// A new connection with the removed CA's certificate.
		conn, rd = client(t, m.addr, true, &first, "")
		if got := roundTrip(t, conn, rd, "version\r\n"); !strings.HasPrefix(got, "VERSION") {
			t.Fatalf("memcached refused a client of the removed CA (%q): the reloader's restart is no longer needed", got)
		}
	})

	writePair(t, dir, first, both)
	m := startMemcached(t, dir, args...)
	r, err := reload.New(reload.Config{Address: m.addr, TLSDir: dir, ClientCertificate: true, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	writePair(t, dir, second, ca2.PEM)
	err = r.Check(context.Background())
	var f *reload.Failure
	if !errors.As(err, &f) || f.What != "certificate" || !strings.Contains(err.Error(), "ca.crt no longer holds CN=ca1") {
		t.Fatalf("want a Failure naming the removed CA, got %v", err)
	}
	t.Logf("the failure reads: %v", err)
	if got, want := servedSerial(t, m.addr, &first), serialOf(t, first); got != want {
		t.Errorf("memcached serves serial %s, want the one it had, %s: nothing is sent before the restart", got, want)
	}
}

// A certificate not valid yet is not sent, and is loaded once it becomes
// valid, without a new change of the files.
func TestACertificateIsLoadedWhenItBecomesValid(t *testing.T) {
	dir, ca, first, m, r := servingFirst(t)
	// x509 times have a resolution of a second.
	from := time.Now().Add(3 * time.Second).Truncate(time.Second)
	future, err := ca.IssueValid("future", []string{"memcached.test.svc"}, from, from.Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	writePair(t, dir, future, nil)
	if err := r.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := servedSerial(t, m.addr, nil), serialOf(t, first); got != want {
		t.Fatalf("before it is valid: memcached serves serial %s, want the one it had, %s", got, want)
	}
	time.Sleep(time.Until(from))
	if err := r.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := servedSerial(t, m.addr, nil), serialOf(t, future); got != want {
		t.Errorf("once it is valid: memcached serves serial %s, want the new %s", got, want)
	}
}
