package secrets

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/internal/testsupport/testcerts"
)

// What memcached 1.6.18 (Debian's, the real node's) does with an
// authentication file, tried line by line: it refuses to start on an empty
// line or one without ':', and starts, letting nobody in by that entry, on
// everything else refused here.
func TestAuthFileAsMemcachedReadsIt(t *testing.T) {
	long := strings.Repeat("p", MaxAuthTokenLength-2)
	tests := []struct {
		name, file string
		problem    string // "" when memcached lets every user in
	}{
		{"one user", "alice:pw\n", ""},
		{"a colon in the password", "alice:p:w\n", ""},
		{"eight users", strings.Repeat("u:p\n", 8), ""},
		{"the longest token", "u:" + long + "\n", ""},
		{"empty", "", "empty"},
		{"no final newline", "alice:pw", "last line does not end with a newline"},
		{"nine users", strings.Repeat("u:p\n", 9), "reads the first 8 only"},
		{"an empty line", "alice:pw\n\nbob:pw\n", "line 2 is empty"},
		{"a trailing empty line", "alice:pw\n\n", "line 2 is empty"},
		{"no colon", "alice\n", "line 1 is not user:password"},
		{"no user", ":pw\n", "empty user or password"},
		{"no password", "alice:\n", "empty user or password"},
		{"a space in the user", "al ice:pw\n", "a space or tab"},
		{"a space in the password", "alice:p w\n", "a password with a space"},
		{"CRLF", "alice:pw\r\n", "carriage return"},
		{"too long", "u:" + long + "p\n", "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckAuthFile([]byte(tt.file))
			if tt.problem == "" {
				NewWithT(t).Expect(err).NotTo(HaveOccurred())
				return
			}
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.problem)))
			NewWithT(t).Expect(err.Error()).NotTo(ContainSubstring("pw"), "a problem never quotes the file")
		})
	}
}

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

	sum := Summarize(s)
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
	before := sum.Digest(CertKey, KeyKey)
	s.Data["authfile"] = []byte("bob:pw\n")
	g.Expect(Summarize(s).Digest(CertKey, KeyKey)).To(Equal(before))
	renewed, err := ca.Issue("cache", []string{"cache.ns.svc"})
	g.Expect(err).NotTo(HaveOccurred())
	s.Data[CertKey], s.Data[KeyKey] = renewed.Cert, renewed.Key
	g.Expect(Summarize(s).Digest(CertKey, KeyKey)).NotTo(Equal(before))
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
		{"a key of another certificate", map[string][]byte{CertKey: good.Cert, KeyKey: another.Key}, UseServing, "not a certificate chain and its key"},
		{"no key", map[string][]byte{CertKey: good.Cert}, UseServing, "no certificate and key"},
		{"garbage CA", map[string][]byte{CertKey: good.Cert, KeyKey: good.Key, CAKey: []byte("not PEM")}, UseClientCA, "something other than PEM certificates"},
		{"a key as CA", map[string][]byte{CertKey: good.Cert, KeyKey: good.Key, CAKey: good.Key}, UseClientCA, "not CERTIFICATE"},
		{"a server-only certificate as client", map[string][]byte{CertKey: serverOnly.Cert, KeyKey: serverOnly.Key, CAKey: ca.PEM}, UseClient, "not a client certificate that ca.crt accepts"},
		{"a certificate of another CA as client", map[string][]byte{CertKey: good.Cert, KeyKey: good.Key, CAKey: other.PEM}, UseClient, "not a client certificate that ca.crt accepts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum := Summarize(&corev1.Secret{Data: tt.data})
			NewWithT(t).Expect(sum.Problems).To(HaveKeyWithValue(tt.use, ContainSubstring(tt.problem)))
		})
	}
}

// memcached's certificate is checked against the time and the name clients
// verify, one rule at a time.
func TestServingCertificateIsCheckedForTimeAndName(t *testing.T) {
	g := NewWithT(t)
	ca, err := testcerts.NewCA("ca")
	g.Expect(err).NotTo(HaveOccurred())
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	const host = "cache.ns.svc"
	summarize := func(hosts []string, from, to time.Time) *Certificate {
		p, err := ca.IssueValid("cache", hosts, from, to)
		g.Expect(err).NotTo(HaveOccurred())
		sum := Summarize(ca.Secret("ns", "cache-tls", p))
		g.Expect(sum.Serving).NotTo(BeNil())
		return sum.Serving
	}
	day := 24 * time.Hour
	tests := []struct {
		name     string
		hosts    []string
		from, to time.Time
		problem  string
	}{
		{"valid, the Service's names", testcerts.ServiceHosts("ns", "cache"), now.Add(-day), now.Add(90 * day), ""},
		{"a wildcard for the namespace", []string{"*.ns.svc"}, now.Add(-day), now.Add(90 * day), ""},
		{"expired", testcerts.ServiceHosts("ns", "cache"), now.Add(-90 * day), now.Add(-time.Second), "expired at 2026-12-02T11:59:59Z"},
		{"expires this very second", testcerts.ServiceHosts("ns", "cache"), now.Add(-90 * day), now, "expired at 2026-12-02T12:00:00Z"},
		{"not valid yet", testcerts.ServiceHosts("ns", "cache"), now.Add(time.Hour), now.Add(90 * day), "not valid before 2026-12-02T13:00:00Z"},
		{"another Service's name", testcerts.ServiceHosts("ns", "other"), now.Add(-day), now.Add(90 * day), "does not name cache.ns.svc, the Service's name that clients verify (it names other.ns.svc, other.ns.svc.cluster.local)"},
		{"the cluster domain's name only", []string{"cache.ns.svc.cluster.local"}, now.Add(-day), now.Add(90 * day), "does not name cache.ns.svc"},
		{"an IP address only", []string{"10.0.0.1"}, now.Add(-day), now.Add(90 * day), "(it names 10.0.0.1)"},
	}
	for _, tt := range tests {
		err := summarize(tt.hosts, tt.from, tt.to).Check(now, host)
		if tt.problem == "" {
			g.Expect(err).NotTo(HaveOccurred(), tt.name)
		} else {
			g.Expect(err).To(MatchError(ContainSubstring(tt.problem)), tt.name)
		}
	}
}

// A certificate expires soon within 7 days of its end, or within a sixth of
// its lifetime when that is shorter.
func TestCertificateExpiresSoon(t *testing.T) {
	g := NewWithT(t)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	ninety := &Certificate{NotBefore: start, NotAfter: start.Add(90 * day)}
	g.Expect(ninety.ExpiringWindow()).To(Equal(7 * day))
	g.Expect(ninety.ExpiresSoon(start.Add(60*day))).To(BeFalse(), "when cert-manager renews it")
	g.Expect(ninety.ExpiresSoon(start.Add(83*day - time.Second))).To(BeFalse())
	g.Expect(ninety.ExpiresSoon(start.Add(83 * day))).To(BeTrue())
	hour := &Certificate{NotBefore: start, NotAfter: start.Add(time.Hour)}
	g.Expect(hour.ExpiringWindow()).To(Equal(10 * time.Minute))
	g.Expect(hour.ExpiresSoon(start.Add(40*time.Minute))).To(BeFalse(), "when cert-manager renews it")
	g.Expect(hour.ExpiresSoon(start.Add(50 * time.Minute))).To(BeTrue())
}
