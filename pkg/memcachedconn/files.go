package memcachedconn

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/example/memcached-operator/pkg/material"
)

// Material is what a pod-side process connects to memcached with: the
// same for the warm runner, the reloader, the discovery endpoint and the
// key mover, so that a change of how memcached takes connections is made
// here once.
type Material struct {
	// TLS: memcached takes TLS connections only.
	TLS bool
	// CertPEM and KeyPEM, if set, are the certificate presented over TLS
	// when memcached verifies clients' (memcached's own, in the pod).
	CertPEM, KeyPEM []byte
	// Auth, if set, is memcached's authentication file: its first entry
	// logs in.
	Auth []byte
}

// Options are how to reach memcached at address with m.
func (m Material) Options(address string) (Options, error) {
	o := Options{Address: address, TLS: m.TLS}
	if m.TLS && m.CertPEM != nil {
		pair, err := tls.X509KeyPair(m.CertPEM, m.KeyPEM)
		if err != nil {
			return o, fmt.Errorf("the client certificate: %w", err)
		}
		o.Certificate = &pair
	}
	if es := Entries(m.Auth); len(es) > 0 {
		o.Login = es[0]
	}
	return o, nil
}

// Files are where a pod-side process finds its Material: read at each
// connection, so that a rotation is followed.
type Files struct {
	// TLS: memcached takes TLS connections only.
	TLS bool
	// Cert and Key are memcached's own certificate and key: presented
	// when ClientCertificate (memcached verifies clients'), and, for
	// Cert, what a peer presenting the same is known by.
	Cert, Key         string
	ClientCertificate bool
	// CA, if set, is the ca.crt that may vouch for a peer.
	CA string
	// Auth, if set, is memcached's authentication file.
	Auth string
}

// Read reads the Material of f.
func (f Files) Read() (Material, error) {
	m := Material{TLS: f.TLS}
	var err error
	if f.TLS && f.ClientCertificate {
		if m.CertPEM, err = os.ReadFile(f.Cert); err != nil {
			return m, fmt.Errorf("memcached's certificate: %w", err)
		}
		if m.KeyPEM, err = os.ReadFile(f.Key); err != nil {
			return m, fmt.Errorf("memcached's key: %w", err)
		}
	}
	if f.Auth != "" {
		if m.Auth, err = os.ReadFile(f.Auth); err != nil {
			return m, err
		}
	}
	return m, nil
}

// Dial connects to the pod's own memcached at address, logged in.
func (f Files) Dial(ctx context.Context, address string) (net.Conn, error) {
	return f.DialPeer(ctx, address, "")
}

// DialPeer connects to the memcached at address of the slot whose DNS name
// is host (empty: the pod's own), logged in. Over TLS another pod's
// memcached must prove it is the slot's before anything is sent
// (PeerVerifier).
func (f Files) DialPeer(ctx context.Context, address, host string) (net.Conn, error) {
	m, err := f.Read()
	if err != nil {
		return nil, err
	}
	o, err := m.Options(address)
	if err != nil {
		return nil, err
	}
	if f.TLS && host != "" {
		if o.VerifyPeer, err = f.PeerVerifier(host); err != nil {
			return nil, err
		}
	}
	return Dial(ctx, o)
}

// PeerVerifier accepts the memcached of another slot: every pod of a
// Memcached serves the same Secret's certificate, so a peer presenting the
// one this pod serves (Cert) is the Memcached's; while a rotation reaches
// the pods one by one, a peer's certificate that CA signs for the slot's
// DNS name (host) is too.
func (f Files) PeerVerifier(host string) (func(tls.ConnectionState) error, error) {
	own, err := os.ReadFile(f.Cert)
	if err != nil {
		return nil, fmt.Errorf("the served certificate: %w", err)
	}
	ownLeaf, _ := pem.Decode(own)
	var ca []byte
	if f.CA != "" {
		ca, _ = os.ReadFile(f.CA)
	}
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("%s presents no certificate", host)
		}
		leaf := cs.PeerCertificates[0]
		if ownLeaf != nil && bytes.Equal(leaf.Raw, ownLeaf.Bytes) {
			return nil
		}
		pool := x509.NewCertPool()
		if len(ca) == 0 || !pool.AppendCertsFromPEM(ca) {
			return fmt.Errorf("%s presents a certificate other than the served one, and there is no ca.crt to verify it", host)
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: host}); err != nil {
			return fmt.Errorf("%s is not a slot of this Memcached: %w", host, err)
		}
		return nil
	}, nil
}

// ServedFiles are the Files of a pod whose memcached serves the tls.crt,
// tls.key and ca.crt of tlsDir (empty: no TLS), verifying clients'
// certificates when clientCertificate, and logs in with authFile's first
// entry (empty: none).
func ServedFiles(tlsDir string, clientCertificate bool, authFile string) Files {
	f := Files{TLS: tlsDir != "", ClientCertificate: clientCertificate, Auth: authFile}
	if f.TLS {
		f.Cert = filepath.Join(tlsDir, material.CertKey)
		f.Key = filepath.Join(tlsDir, material.KeyKey)
		f.CA = filepath.Join(tlsDir, material.CAKey)
	}
	return f
}
