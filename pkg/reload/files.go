package reload

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/example/memcached-operator/pkg/material"
)

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

// read reads the mounted files.
func (r *Reloader) read() (files, error) {
	return r.readFrom(r.c.TLSDir, r.c.AuthFile)
}

// readFrom reads the certificate, key and CA in tlsDir (when the reloader
// follows TLS) and the authentication file authFile (when it follows one).
func (r *Reloader) readFrom(tlsDir, authFile string) (files, error) {
	var f files
	var err error
	if r.c.TLSDir != "" {
		if f.cert, err = os.ReadFile(filepath.Join(tlsDir, material.CertKey)); err != nil {
			return f, err
		}
		if f.key, err = os.ReadFile(filepath.Join(tlsDir, material.KeyKey)); err != nil {
			return f, err
		}
		if f.ca, err = os.ReadFile(filepath.Join(tlsDir, material.CAKey)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return f, err
		}
	}
	if r.c.AuthFile != "" {
		if f.auth, err = os.ReadFile(authFile); err != nil {
			return f, err
		}
	}
	return f, nil
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

// removedCAs names the certificates of the CA bundle was that the bundle
// now does not hold.
func removedCAs(was, now []byte) []string {
	kept := map[string]bool{}
	for _, c := range certificates(now) {
		kept[string(c.Raw)] = true
	}
	var gone []string
	for _, c := range certificates(was) {
		if !kept[string(c.Raw)] {
			gone = append(gone, c.Subject.String())
		}
	}
	return gone
}

// certificates are the certificates of a PEM bundle that parse.
func certificates(bundle []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			return out
		}
		if c, err := x509.ParseCertificate(block.Bytes); block.Type == "CERTIFICATE" && err == nil {
			out = append(out, c)
		}
	}
}
