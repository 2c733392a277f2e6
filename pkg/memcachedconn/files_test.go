package memcachedconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/example/memcached-operator/internal/testsupport/testcerts"
	"github.com/example/memcached-operator/pkg/material"
)

// The mover reaches another slot's memcached only once it proves it is
// one of the Memcached's: it serves this pod's own certificate, or one
// the served ca.crt signs for the slot's name. Anything else gets no key
// and no login.
func TestAPeerMustProveItIsASlot(t *testing.T) {
	const slot = "c-1.c.ns.svc"
	ca, err := testcerts.NewCA("memcached CA")
	if err != nil {
		t.Fatal(err)
	}
	own, err := ca.Issue("c", []string{"c.ns.svc", "*.c.ns.svc"}, x509ServerAuth...)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{material.CertKey: own.Cert, material.KeyKey: own.Key, material.CAKey: ca.PEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	slotOnly, _ := ca.Issue("c-1", []string{slot}, x509ServerAuth...)
	elsewhere, _ := ca.Issue("other", []string{"other.ns.svc"}, x509ServerAuth...)
	stranger, _ := testcerts.NewCA("stranger")
	impostor, _ := stranger.Issue("c", []string{"c.ns.svc", "*.c.ns.svc", slot}, x509ServerAuth...)

	tests := []struct {
		name   string
		serves testcerts.Pair
		ok     bool
	}{
		{name: "the pod's own certificate", serves: own, ok: true},
		{name: "one the CA signs for the slot", serves: slotOnly, ok: true},
		{name: "one the CA signs for another name", serves: elsewhere},
		{name: "one another CA signs for the slot", serves: impostor},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pair, err := tls.X509KeyPair(tt.serves.Cert, tt.serves.Key)
			if err != nil {
				t.Fatal(err)
			}
			ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					_ = c.(*tls.Conn).Handshake()
					c.Close()
				}
			}()
			conn, err := ServedFiles(dir, false, "").DialPeer(context.Background(), ln.Addr().String(), slot)
			if conn != nil {
				conn.Close()
			}
			if (err == nil) != tt.ok {
				t.Fatalf("dialPeer: %v, want accepted: %v", err, tt.ok)
			}
		})
	}
}

var x509ServerAuth = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
