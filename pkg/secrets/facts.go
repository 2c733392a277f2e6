// Package secrets follows the Secrets that Memcacheds name, one by one, and
// keeps of each only what the operator decides on: a digest of each key and
// what memcached would make of its content. No Secret data stays in memory.
package secrets

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The keys of a kubernetes.io/tls Secret (corev1.TLSCertKey and
// corev1.TLSPrivateKeyKey), and the CA key cert-manager adds.
const (
	CertKey = corev1.TLSCertKey
	KeyKey  = corev1.TLSPrivateKeyKey
	CAKey   = "ca.crt"
)

// Limits of memcached's authentication file (-Y), as memcached 1.6 reads it:
// entries past the eighth are ignored, and a user and password longer than
// this together (with the space a client sends between them) never match.
const (
	MaxAuthEntries     = 8
	MaxAuthTokenLength = 256
)

// Summary is what the operator keeps of one Secret.
type Summary struct {
	// Name, Namespace, UID and ResourceVersion of the Secret; nothing else
	// of its metadata.
	metav1.ObjectMeta

	// Digests are the SHA-256 of each key's value, in hex.
	Digests map[string]string
	// Problems tell, for each use of the Secret's content, why memcached
	// cannot use it; a use that is absent is fine.
	Problems map[Use]string
	// Serving is the certificate of tls.crt and tls.key when they make a
	// usable pair; nil otherwise. Whether it is valid now and for the
	// Service's name depends on the time and the Memcached: Certificate.Check.
	Serving *Certificate
}

// Certificate is what the operator keeps of memcached's certificate (the
// first of tls.crt): when it is valid and for which names.
type Certificate struct {
	NotBefore, NotAfter time.Time
	DNSNames            []string
	IPAddresses         []net.IP
}

// Check tells whether c is valid at now for host, a name clients connect
// to, and if not, why.
func (c *Certificate) Check(now time.Time, host string) error {
	switch {
	case now.Before(c.NotBefore):
		return fmt.Errorf("the certificate in %s is not valid before %s", CertKey, c.NotBefore.UTC().Format(time.RFC3339))
	case !now.Before(c.NotAfter):
		return fmt.Errorf("the certificate in %s expired at %s", CertKey, c.NotAfter.UTC().Format(time.RFC3339))
	}
	x := &x509.Certificate{DNSNames: c.DNSNames, IPAddresses: c.IPAddresses}
	if err := x.VerifyHostname(host); err != nil {
		names := append([]string(nil), c.DNSNames...)
		for _, ip := range c.IPAddresses {
			names = append(names, ip.String())
		}
		return fmt.Errorf("the certificate in %s does not name %s, the Service's name that clients verify (it names %s)", CertKey, host, strings.Join(names, ", "))
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

// Use is one way memcached uses a Secret's content: a Role, and for an
// authentication file the key that holds it.
type Use struct {
	Role Role
	// Key is the key of an authentication file; empty for other roles.
	Key string
}

// Role is what a Secret's content is to memcached.
type Role int

const (
	// Serving: tls.crt and tls.key as memcached's certificate chain and key.
	Serving Role = iota + 1
	// ClientCA: ca.crt as the CAs client certificates must chain to.
	ClientCA
	// Client: tls.crt and tls.key as a client certificate that memcached
	// accepts given ca.crt (the exporter's, when memcached asks clients
	// for one).
	Client
	// AuthFile: a key's value as memcached's authentication file.
	AuthFile
)

// The uses of a TLS Secret's content.
var (
	UseServing  = Use{Role: Serving}
	UseClientCA = Use{Role: ClientCA}
	UseClient   = Use{Role: Client}
)

// UseAuthFile is the use of key as memcached's authentication file.
func UseAuthFile(key string) Use { return Use{Role: AuthFile, Key: key} }

// String says what u is, for a message to a person.
func (u Use) String() string {
	switch u.Role {
	case Serving:
		return "memcached's certificate and key"
	case ClientCA:
		return "the CA of client certificates"
	case Client:
		return "the exporter's client certificate"
	case AuthFile:
		return "memcached's authentication file (key " + u.Key + ")"
	}
	return fmt.Sprintf("use %d", u.Role)
}

// Summarize reduces s to its Summary.
func Summarize(s *corev1.Secret) *Summary {
	sum := &Summary{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion},
		Digests:    make(map[string]string, len(s.Data)),
		Problems:   map[Use]string{},
	}
	for k, v := range s.Data {
		d := sha256.Sum256(v)
		sum.Digests[k] = hex.EncodeToString(d[:])
		if err := CheckAuthFile(v); err != nil {
			sum.Problems[UseAuthFile(k)] = err.Error()
		}
	}
	crt, key := s.Data[CertKey], s.Data[KeyKey]
	if leaf, err := checkServing(crt, key); err != nil {
		sum.Problems[UseServing] = err.Error()
	} else {
		sum.Serving = &Certificate{NotBefore: leaf.NotBefore, NotAfter: leaf.NotAfter, DNSNames: leaf.DNSNames, IPAddresses: leaf.IPAddresses}
	}
	roots, err := certPool(s.Data[CAKey])
	if err != nil {
		sum.Problems[UseClientCA] = err.Error()
	}
	if err := checkClient(crt, key, roots); err != nil {
		sum.Problems[UseClient] = err.Error()
	}
	return sum
}

// Digest is one digest of the values of keys, in that order: what changes
// when any of them changes.
func (s *Summary) Digest(keys ...string) string {
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\n", k, s.Digests[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Missing are those of keys the Secret lacks, sorted.
func (s *Summary) Missing(keys ...string) []string {
	var missing []string
	for _, k := range keys {
		if _, ok := s.Digests[k]; !ok {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	return missing
}

func checkServing(crt, key []byte) (*x509.Certificate, error) {
	if len(crt) == 0 || len(key) == 0 {
		return nil, errors.New("no certificate and key")
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, fmt.Errorf("%s and %s are not a certificate chain and its key: %w", CertKey, KeyKey, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CertKey, err)
	}
	return leaf, nil
}

// certPool holds the certificates of a PEM bundle; an error when it holds
// none, or anything but certificates.
func certPool(bundle []byte) (*x509.CertPool, error) {
	if len(bytes.TrimSpace(bundle)) == 0 {
		return nil, fmt.Errorf("no %s", CAKey)
	}
	pool := x509.NewCertPool()
	n := 0
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
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s holds no certificate", CAKey)
	}
	return pool, nil
}

// checkClient tells whether crt, presented as a client certificate, chains
// to roots for client authentication (at the time it starts being valid:
// expiry is not the question here).
func checkClient(crt, key []byte, roots *x509.CertPool) error {
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
// ignores an unterminated last line, entries past MaxAuthEntries, and
// users or passwords no client can send.
func CheckAuthFile(b []byte) error {
	if len(b) == 0 {
		return errors.New("it is empty: no client could authenticate")
	}
	if b[len(b)-1] != '\n' {
		return errors.New("its last line does not end with a newline: memcached ignores that line")
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) > MaxAuthEntries {
		return fmt.Errorf("it has %d entries: memcached reads the first %d only", len(lines), MaxAuthEntries)
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
		case len(user)+1+len(password) > MaxAuthTokenLength:
			return fmt.Errorf("line %d is too long: a user and password of more than %d bytes together never match", n, MaxAuthTokenLength-1)
		}
	}
	return nil
}
