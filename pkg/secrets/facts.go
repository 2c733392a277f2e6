// Package secrets follows the Secrets that Memcacheds name, one by one, and
// keeps of each only what the operator decides on: a digest of each key and
// what memcached would make of its content. No Secret data stays in memory.
package secrets

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	"github.com/example/memcached-operator/pkg/material"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	Serving *material.Certificate
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

// summarize reduces s to its Summary.
func summarize(s *corev1.Secret) *Summary {
	sum := &Summary{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion},
		Digests:    make(map[string]string, len(s.Data)),
		Problems:   map[Use]string{},
	}
	for k, v := range s.Data {
		d := sha256.Sum256(v)
		sum.Digests[k] = hex.EncodeToString(d[:])
		if err := material.CheckAuthFile(v); err != nil {
			sum.Problems[UseAuthFile(k)] = err.Error()
		}
	}
	crt, key := s.Data[material.CertKey], s.Data[material.KeyKey]
	if leaf, err := material.ServingPair(crt, key); err != nil {
		sum.Problems[UseServing] = err.Error()
	} else {
		sum.Serving = material.CertificateOf(leaf)
	}
	roots, err := material.CAPool(s.Data[material.CAKey])
	if err != nil {
		sum.Problems[UseClientCA] = err.Error()
	}
	if err := material.CheckClient(crt, key, roots); err != nil {
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
