// Package testcerts issues certificates for tests: a CA, and certificates
// it signs, in PEM, as cert-manager would put them in a Secret.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CA is a certificate authority.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA's certificate.
	PEM []byte
}

// NewCA makes a self-signed CA named cn.
func NewCA(cn string) (*CA, error) { return newCA(cn, nil) }

// Intermediate makes a CA named cn that ca signs.
func (ca *CA) Intermediate(cn string) (*CA, error) { return newCA(cn, ca) }

// newCA makes a CA named cn, signed by parent, or by itself when parent is
// nil.
func newCA(cn string, parent *CA) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Pair is a certificate and its key, in PEM.
type Pair struct {
	Cert, Key []byte
}

// Issue signs a certificate for cn and the DNS names or IP addresses
// hosts, usable for usages (both server and client authentication when
// none is given).
func (ca *CA) Issue(cn string, hosts []string, usages ...x509.ExtKeyUsage) (Pair, error) {
	return ca.IssueValid(cn, hosts, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), usages...)
}

// IssueValid is Issue with the certificate valid from notBefore to
// notAfter (expired, or not yet valid, as a test needs).
func (ca *CA) IssueValid(cn string, hosts []string, notBefore, notAfter time.Time, usages ...x509.ExtKeyUsage) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	if len(usages) == 0 {
		usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// ServiceHosts are the names clients in the cluster reach a Service by.
func ServiceHosts(namespace, service string) []string {
	return []string{service + "." + namespace + ".svc", service + "." + namespace + ".svc.cluster.local"}
}

// IssueForService signs a certificate for the names of a Service, for
// server and client authentication: what cert-manager issues for a
// Certificate with those names and both usages.
func (ca *CA) IssueForService(namespace, service string) (Pair, error) {
	return ca.Issue(service, ServiceHosts(namespace, service))
}

// ForService makes a CA and a certificate it signs for a Service.
func ForService(namespace, service string) (*CA, Pair, error) {
	ca, err := NewCA(service + "-ca")
	if err != nil {
		return nil, Pair{}, err
	}
	p, err := ca.IssueForService(namespace, service)
	return ca, p, err
}

// Secret is the kubernetes.io/tls Secret cert-manager would write for p,
// issued by ca.
func (ca *CA) Secret(namespace, name string, p Pair) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: p.Cert, corev1.TLSPrivateKeyKey: p.Key, "ca.crt": ca.PEM},
	}
}

// Pool holds the CA's certificate, for a client's RootCAs.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return pool
}

// TLS is p as a certificate for a tls.Config.
func (p Pair) TLS() (tls.Certificate, error) { return tls.X509KeyPair(p.Cert, p.Key) }

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}
