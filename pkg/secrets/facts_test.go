package secrets

import (
	"crypto/x509"
	"testing"

	"github.com/example/memcached-operator/pkg/material"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/internal/testsupport/testcerts"
)

func TestSummaryKeepsDigestsAndProblemsOnly(t *testing.T) {
	g := NewWithT(t)
	ca, err := testcerts.NewCA("ca")
	g.Expect(err).NotTo(HaveOccurred())
	pair, err := ca.Issue("cache", []string{"cache.ns.svc"})
	g.Expect(err).NotTo(HaveOccurred())
	s := ca.Secret("ns", "cache-tls", pair)
	s.Data["authfile"] = []byte("alice:pw\n")
	s.UID, s.ResourceVersion = "uid-1", "42"
	// kubectl apply keeps a copy of the whole Secret, data included, in an
	// annotation; managed fields name every key.
	s.Labels = map[string]string{"team": "payments"}
	s.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"authfile":"YWxpY2U6cHcK"}}`}
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{"f:authfile":{}}}`)}}}
	s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cert-manager.io/v1", Kind: "Certificate", Name: "cache", UID: "uid-2"}}

	sum := summarize(s)
	g.Expect(sum.ObjectMeta).To(Equal(metav1.ObjectMeta{Name: "cache-tls", Namespace: "ns", UID: "uid-1", ResourceVersion: "42"}),
		"of the metadata, the identity only: no annotation (kubectl's holds the data), no managed fields, labels or owners")
	g.Expect(sum.Name).To(Equal("cache-tls"))
	g.Expect(sum.Digests).To(HaveLen(4))
	for k, d := range sum.Digests {
		g.Expect(d).To(HaveLen(64), k)
		g.Expect(d).NotTo(ContainSubstring(string(s.Data[k])))
	}
	g.Expect(sum.Problems).NotTo(HaveKey(UseServing))
	g.Expect(sum.Problems).NotTo(HaveKey(UseClientCA))
	g.Expect(sum.Problems).NotTo(HaveKey(UseClient))
	g.Expect(sum.Problems).NotTo(HaveKey(UseAuthFile("authfile")))
	g.Expect(sum.Problems).To(HaveKey(UseAuthFile(corev1.TLSCertKey)), "a certificate is no authentication file")
	g.Expect(sum.Missing("tls.crt", "nope", "authfile", "a")).To(Equal([]string{"a", "nope"}))

	// The digest of some keys changes with them, and with them only.
	before := sum.Digest(material.CertKey, material.KeyKey)
	s.Data["authfile"] = []byte("bob:pw\n")
	g.Expect(summarize(s).Digest(material.CertKey, material.KeyKey)).To(Equal(before))
	renewed, err := ca.Issue("cache", []string{"cache.ns.svc"})
	g.Expect(err).NotTo(HaveOccurred())
	s.Data[material.CertKey], s.Data[material.KeyKey] = renewed.Cert, renewed.Key
	g.Expect(summarize(s).Digest(material.CertKey, material.KeyKey)).NotTo(Equal(before))
}

func TestSummaryTellsWhatMemcachedCannotUse(t *testing.T) {
	ca, err := testcerts.NewCA("ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testcerts.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	good, _ := ca.Issue("cache", nil)
	another, _ := ca.Issue("cache", nil)
	serverOnly, _ := ca.Issue("cache", nil, x509.ExtKeyUsageServerAuth)
	tests := []struct {
		name    string
		data    map[string][]byte
		use     Use
		problem string
	}{
		{"a key of another certificate", map[string][]byte{material.CertKey: good.Cert, material.KeyKey: another.Key}, UseServing, "not a certificate chain and its key"},
		{"no key", map[string][]byte{material.CertKey: good.Cert}, UseServing, "no certificate and key"},
		{"garbage CA", map[string][]byte{material.CertKey: good.Cert, material.KeyKey: good.Key, material.CAKey: []byte("not PEM")}, UseClientCA, "something other than PEM certificates"},
		{"a key as CA", map[string][]byte{material.CertKey: good.Cert, material.KeyKey: good.Key, material.CAKey: good.Key}, UseClientCA, "not CERTIFICATE"},
		{"a server-only certificate as client", map[string][]byte{material.CertKey: serverOnly.Cert, material.KeyKey: serverOnly.Key, material.CAKey: ca.PEM}, UseClient, "not a client certificate that ca.crt accepts"},
		{"a certificate of another CA as client", map[string][]byte{material.CertKey: good.Cert, material.KeyKey: good.Key, material.CAKey: other.PEM}, UseClient, "not a client certificate that ca.crt accepts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum := summarize(&corev1.Secret{Data: tt.data})
			NewWithT(t).Expect(sum.Problems).To(HaveKeyWithValue(tt.use, ContainSubstring(tt.problem)))
		})
	}
}
