//go:build integration

package reload_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
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
