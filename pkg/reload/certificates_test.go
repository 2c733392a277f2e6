//go:build integration

package reload_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/pkg/material"

	"github.com/example/memcached-operator/internal/testsupport/testcerts"
	"github.com/example/memcached-operator/pkg/reload"
)

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

// Where memcached does not verify clients, its ca.crt is no one's trust:
// a ca.crt that drops a CA is loaded in place like any new content, and
// the pods do not restart for it.
func TestARemovedCAIsReloadedWhereClientsAreNotVerified(t *testing.T) {
	dir := filesDir(t)
	ca1, ca2 := newCA(t, "ca1"), newCA(t, "ca2")
	first, second := issue(t, ca1, "first"), issue(t, ca2, "second")
	writePair(t, dir, first, append(append([]byte{}, ca1.PEM...), ca2.PEM...))
	m := startMemcached(t, dir, "--enable-ssl", "--extended=ssl_chain_cert="+filepath.Join(dir, material.CertKey)+",ssl_key="+filepath.Join(dir, material.KeyKey))
	r, err := reload.New(reload.Config{Address: m.addr, TLSDir: dir, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	writePair(t, dir, second, ca2.PEM)
	if err := r.Check(context.Background()); err != nil {
		t.Fatalf("a ca.crt without ca1, where no client certificate is verified: %v", err)
	}
	if got, want := servedSerial(t, m.addr, nil), serialOf(t, second); got != want {
		t.Errorf("memcached serves serial %s, want the new certificate's, %s", got, want)
	}
}
