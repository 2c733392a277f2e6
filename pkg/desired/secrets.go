package desired

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/example/memcached-operator/pkg/material"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// SecretDigests are digests of the Secret content the pods of a
// Memcached mount (the keys TLSKeys and AuthKey name). Empty when not
// mounted. Without a reloader a new digest is a new pod template, which
// rolls the pods; with one, the pods load new content in place.
type SecretDigests struct {
	TLS  string
	Auth string
	// RestartedFor is the Combined digest the pods were last restarted
	// for, when a reload in place failed; empty if never.
	RestartedFor string
}

// Combined is one digest of all the Secret content the pods mount.
func (d SecretDigests) Combined() string {
	h := sha256.Sum256([]byte("tls=" + d.TLS + "\nauth=" + d.Auth + "\n"))
	return hex.EncodeToString(h[:])
}

// RunsReloader tells whether m's pods run the reloader: they mount a Secret and
// the operator has the reloader's image.
func RunsReloader(m *cachev1alpha1.Memcached, images Images) bool {
	return images.Reloader != "" && (m.Spec.TLS != nil || m.Spec.Auth != nil)
}

// TLSKeys are the keys of the spec.tls Secret that m's pods mount:
// the certificate chain and key, and the client CA when client
// certificates are asked for.
func TLSKeys(m *cachev1alpha1.Memcached) []string {
	if m.Spec.TLS == nil {
		return nil
	}
	keys := []string{material.CertKey, material.KeyKey}
	if verifiesClients(m) {
		keys = append(keys, material.CAKey)
	}
	return keys
}

// AuthKey is the key of the spec.auth Secret that m's pods mount; empty
// without spec.auth.
func AuthKey(m *cachev1alpha1.Memcached) string {
	if m.Spec.Auth == nil {
		return ""
	}
	if m.Spec.Auth.Key == "" {
		return authFile // the CRD's default
	}
	return m.Spec.Auth.Key
}

func verifiesClients(m *cachev1alpha1.Memcached) bool {
	return m.Spec.TLS != nil && m.Spec.TLS.ClientCertificates != "" && m.Spec.TLS.ClientCertificates != cachev1alpha1.ClientCertificatesNone
}

// sslVerifyModes are memcached's ssl_verify_mode values.
var sslVerifyModes = map[cachev1alpha1.ClientCertificates]int{
	cachev1alpha1.ClientCertificatesRequest: 1,
	cachev1alpha1.ClientCertificatesRequire: 2,
}
