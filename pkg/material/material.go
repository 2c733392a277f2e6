// Package material is what memcached may load from the Secrets a
// Memcached names, checked by one rule that the operator (which holds the
// pods while a Secret is unfit) and the reloader (which has memcached load
// new content in place) both apply: the key names, the certificate's
// fitness, the CA bundle, the client certificate and the authentication
// file. It imports nothing of Kubernetes, so the reloader stays small.
package material

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// The keys of a kubernetes.io/tls Secret (corev1.TLSCertKey and
// corev1.TLSPrivateKeyKey), and the CA key cert-manager adds: the names of
// the files memcached reads, as the pods mount them.
const (
	CertKey = "tls.crt"
	KeyKey  = "tls.key"
	CAKey   = "ca.crt"
)

// Limits of memcached's authentication file (-Y), as memcached 1.6 reads it:
// entries past the eighth are ignored, and a user and password longer than
// this together (with the space a client sends between them) never match.
const (
	maxAuthEntries     = 8
	maxAuthTokenLength = 256
)

// Certificate is what the operator and the reloader keep of memcached's
// certificate (the first of tls.crt): when it is valid and for which names.
type Certificate struct {
	NotBefore, NotAfter time.Time
	DNSNames            []string
	IPAddresses         []net.IP
}

// Check tells whether c is valid at now for host, a name clients connect
// to, and if not, why.
func (c *Certificate) Check(now time.Time, host string) error {
	if err := c.checkTime(now); err != nil {
		return err
	}
	x := &x509.Certificate{DNSNames: c.DNSNames, IPAddresses: c.IPAddresses}
	if err := x.VerifyHostname(host); err != nil {
		names := append([]string(nil), c.DNSNames...)
		for _, ip := range c.IPAddresses {
			names = append(names, ip.String())
		}
		return fmt.Errorf("the certificate in %s does not name %s, the Service's name that clients verify (it names %s)", CertKey, host, someOf(names))
	}
	return nil
}

// namesShown bounds how many of a certificate's names a message lists: a
// certificate may carry thousands, and a condition's message is bounded.
const namesShown = 5

// someOf lists the first namesShown of names, and how many more there are.
func someOf(names []string) string {
	if len(names) <= namesShown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:namesShown], ", "), len(names)-namesShown)
}

// checkTime tells whether c is valid at now, and if not, why.
func (c *Certificate) checkTime(now time.Time) error {
	switch {
	case now.Before(c.NotBefore):
		return fmt.Errorf("the certificate in %s is not valid before %s", CertKey, c.NotBefore.UTC().Format(time.RFC3339))
	case !now.Before(c.NotAfter):
		return fmt.Errorf("the certificate in %s expired at %s", CertKey, c.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// ExpiringWindow is how long before its end a certificate is said to
// expire soon: 7 days, or a sixth of its lifetime when that is shorter.
// cert-manager renews a third of the lifetime ahead (30 days of a 90-day
// certificate), so a certificate inside this window has missed its
// renewal by a wide margin.
func (c *Certificate) ExpiringWindow() time.Duration {
	return min(7*24*time.Hour, c.NotAfter.Sub(c.NotBefore)/6)
}

// ExpiresSoon tells whether c, at now, is inside its ExpiringWindow.
func (c *Certificate) ExpiresSoon(now time.Time) bool {
	return !now.Before(c.NotAfter.Add(-c.ExpiringWindow()))
}

// Fit tells whether memcached may load crt, key and ca (ca may be empty:
// no client certificates are verified), and if not, why: they must be a
// certificate chain and its key, ca must hold certificates only, and the
// certificate must be valid at now and for host, the name clients verify
// (not checked when host is empty), or it would fail every client that
// verifies it where the one memcached serves may not. The reloader loads
// nothing that is not fit. The operator applies the same checks in two
// steps, as it keeps no Secret data: ServingPair and CAPool when it
// summarizes a Secret, Certificate.Check at each reconcile; it holds the
// pods as they are while a Secret is not fit, and reports it.
func Fit(crt, key, ca []byte, host string, now time.Time) (*Certificate, error) {
	leaf, err := ServingPair(crt, key)
	if err != nil {
		return nil, err
	}
	if len(ca) > 0 {
		if _, err := CAPool(ca); err != nil {
			return nil, err
		}
	}
	c := CertificateOf(leaf)
	if host == "" {
		return c, c.checkTime(now)
	}
	return c, c.Check(now, host)
}

// CertificateOf is what is kept of leaf.
func CertificateOf(leaf *x509.Certificate) *Certificate {
	return &Certificate{NotBefore: leaf.NotBefore, NotAfter: leaf.NotAfter, DNSNames: leaf.DNSNames, IPAddresses: leaf.IPAddresses}
}

// ServingPair is the first certificate of crt when crt and key are a
// certificate chain and its key; otherwise why not. Every certificate of
// the chain is parsed, as memcached's OpenSSL does (a truncated
// intermediate stops memcached from starting, and fails refresh_certs),
// and each must have signed the one before it, or clients that verify the
// chain refuse it while memcached serves it.
func ServingPair(crt, key []byte) (*x509.Certificate, error) {
	if len(crt) == 0 || len(key) == 0 {
		return nil, errors.New("no certificate and key")
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, fmt.Errorf("%s and %s are not a certificate chain and its key: %w", CertKey, KeyKey, err)
	}
	chain := make([]*x509.Certificate, len(pair.Certificate))
	for i, der := range pair.Certificate {
		if chain[i], err = x509.ParseCertificate(der); err != nil {
			return nil, fmt.Errorf("certificate %d of %d in %s: %w", i+1, len(chain), CertKey, err)
		}
	}
	for i := 1; i < len(chain); i++ {
		if err := chain[i-1].CheckSignatureFrom(chain[i]); err != nil {
			return nil, fmt.Errorf("certificate %d of %d in %s (%s) did not sign the one before it (%s): clients cannot verify the chain: %w",
				i+1, len(chain), CertKey, chain[i].Subject, chain[i-1].Subject, err)
		}
	}
	return chain[0], nil
}

// CAPool holds the certificates of a PEM bundle; an error when it holds
// none, or anything but certificates.
func CAPool(bundle []byte) (*x509.CertPool, error) {
	if len(bytes.TrimSpace(bundle)) == 0 {
		return nil, fmt.Errorf("no %s", CAKey)
	}
	pool := x509.NewCertPool()
	found := false
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if len(bytes.TrimSpace(rest)) > 0 {
				return nil, fmt.Errorf("%s holds something other than PEM certificates", CAKey)
			}
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%s holds a PEM block of type %q, not CERTIFICATE", CAKey, block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", CAKey, err)
		}
		pool.AddCert(c)
		found = true
	}
	if !found {
		return nil, fmt.Errorf("%s holds no certificate", CAKey)
	}
	return pool, nil
}

// CheckClient tells whether crt, presented as a client certificate, chains
// to roots for client authentication (at the time it starts being valid:
// expiry is not the question here).
func CheckClient(crt, key []byte, roots *x509.CertPool) error {
	if roots == nil {
		return fmt.Errorf("no usable %s to verify it with", CAKey)
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return errors.New("no usable certificate and key")
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return err
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	_, err = leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   leaf.NotBefore,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return fmt.Errorf("%s is not a client certificate that %s accepts: %w", CertKey, CAKey, err)
	}
	return nil
}

// CheckAuthFile tells whether memcached 1.6 reads b as an authentication
// file that lets every user it lists in, and if not, why. memcached itself
// refuses to start on an empty line or a line without ':', and silently
// ignores an unterminated last line, entries past maxAuthEntries, and
// users or passwords no client can send.
func CheckAuthFile(b []byte) error {
	if len(b) == 0 {
		return errors.New("it is empty: no client could authenticate")
	}
	if b[len(b)-1] != '\n' {
		return errors.New("its last line does not end with a newline: memcached ignores that line")
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) > maxAuthEntries {
		return fmt.Errorf("it has %d entries: memcached reads the first %d only", len(lines), maxAuthEntries)
	}
	for i, line := range lines {
		n := i + 1
		user, password, ok := strings.Cut(line, ":")
		switch {
		case line == "":
			return fmt.Errorf("line %d is empty: memcached refuses to start", n)
		case !ok:
			return fmt.Errorf("line %d is not user:password: memcached refuses to start", n)
		case user == "" || password == "":
			return fmt.Errorf("line %d has an empty user or password: no client can send it", n)
		case strings.ContainsAny(user, " \t\r"):
			return fmt.Errorf("line %d has a user with a space or tab: no client can send it", n)
		case strings.Contains(password, " "):
			return fmt.Errorf("line %d has a password with a space: memcached never matches it", n)
		case strings.ContainsAny(password, "\r"):
			return fmt.Errorf("line %d ends with a carriage return: memcached would take it as part of the password", n)
		case len(user)+1+len(password) > maxAuthTokenLength:
			return fmt.Errorf("line %d is too long: a user and password of more than %d bytes together never match", n, maxAuthTokenLength-1)
		}
	}
	return nil
}
