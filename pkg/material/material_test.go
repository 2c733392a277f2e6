package material

import (
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/internal/testsupport/testcerts"
)

// What memcached 1.6.18 (Debian's, the real node's) does with an
// authentication file, tried line by line: it refuses to start on an empty
// line or one without ':', and starts, letting nobody in by that entry, on
// everything else refused here.
func TestAuthFileAsMemcachedReadsIt(t *testing.T) {
	long := strings.Repeat("p", maxAuthTokenLength-2)
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
		{"too long", "u:" + long + "p\n", "too long: a user and password of more than 255 bytes together never match"},
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

// memcached's certificate is fit only when valid at the time and for the
// name clients verify, one rule at a time.
func TestServingCertificateIsCheckedForTimeAndName(t *testing.T) {
	g := NewWithT(t)
	ca, err := testcerts.NewCA("ca")
	g.Expect(err).NotTo(HaveOccurred())
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	const host = "cache.ns.svc"
	fit := func(hosts []string, from, to time.Time) error {
		p, err := ca.IssueValid("cache", hosts, from, to)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = Fit(p.Cert, p.Key, ca.PEM, host, now)
		return err
	}
	day := 24 * time.Hour
	var manyNames []string
	for i := range 1000 {
		manyNames = append(manyNames, fmt.Sprintf("n%d.ns.svc", i))
	}
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
		{"many other names", manyNames, now.Add(-day), now.Add(90 * day), "(it names n0.ns.svc, n1.ns.svc, n2.ns.svc, n3.ns.svc, n4.ns.svc and 995 more)"},
	}
	for _, tt := range tests {
		err := fit(tt.hosts, tt.from, tt.to)
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

// A pair that is not a chain and its key, and a CA bundle holding anything
// but certificates, are never fit, whatever the time and name.
func TestFitRefusesWhatMemcachedCannotLoad(t *testing.T) {
	g := NewWithT(t)
	ca, err := testcerts.NewCA("ca")
	g.Expect(err).NotTo(HaveOccurred())
	const host = "cache.ns.svc"
	p, err := ca.IssueForService("ns", "cache")
	g.Expect(err).NotTo(HaveOccurred())
	other, err := ca.IssueForService("ns", "cache")
	g.Expect(err).NotTo(HaveOccurred())
	inter, err := ca.Intermediate("intermediate")
	g.Expect(err).NotTo(HaveOccurred())
	viaInter, err := inter.IssueForService("ns", "cache")
	g.Expect(err).NotTo(HaveOccurred())
	chain := append(append([]byte{}, viaInter.Cert...), inter.PEM...)
	// The intermediate cut short by 20 bytes, still well-formed PEM:
	// memcached 1.6.18 refuses to start with it ("Error loading the
	// certificate chain ... too long").
	block, _ := pem.Decode(inter.PEM)
	cut := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes[:len(block.Bytes)-20]})
	truncated := append(append([]byte{}, viaInter.Cert...), cut...)
	// An intermediate that did not sign the certificate: memcached serves
	// it, and clients cannot verify it.
	unrelated := append(append([]byte{}, viaInter.Cert...), ca.PEM...)
	reversed := append(append([]byte{}, inter.PEM...), viaInter.Cert...)
	now := time.Now()
	tests := []struct {
		name          string
		crt, key, cas []byte
		problem       string
	}{
		{"fit, a chain through an intermediate", chain, viaInter.Key, ca.PEM, ""},
		{"fit, the chain and its root", append(append([]byte{}, chain...), ca.PEM...), viaInter.Key, ca.PEM, ""},
		{"a truncated intermediate", truncated, viaInter.Key, ca.PEM, "certificate 2 of 2 in tls.crt: x509: malformed"},
		{"an intermediate that did not sign it", unrelated, viaInter.Key, ca.PEM, "certificate 2 of 2 in tls.crt (CN=ca) did not sign the one before it (CN=cache)"},
		{"the chain in the wrong order", reversed, viaInter.Key, ca.PEM, "not a certificate chain and its key"},
		{"fit, without a CA", p.Cert, p.Key, nil, ""},
		{"fit, with a CA", p.Cert, p.Key, ca.PEM, ""},
		{"another certificate's key", p.Cert, other.Key, nil, "are not a certificate chain and its key"},
		{"no key", p.Cert, nil, nil, "no certificate and key"},
		{"a CA bundle with a key in it", p.Cert, p.Key, append(append([]byte{}, ca.PEM...), p.Key...), "not CERTIFICATE"},
		{"a CA bundle of text", p.Cert, p.Key, []byte("not a certificate\n"), "something other than PEM certificates"},
	}
	for _, tt := range tests {
		c, err := Fit(tt.crt, tt.key, tt.cas, host, now)
		if tt.problem == "" {
			g.Expect(err).NotTo(HaveOccurred(), tt.name)
			g.Expect(c.DNSNames).To(ContainElement(host), tt.name)
		} else {
			g.Expect(err).To(MatchError(ContainSubstring(tt.problem)), tt.name)
		}
	}
}

// The key names are those of a kubernetes.io/tls Secret.
func TestKeysAreTheTLSSecretsKeys(t *testing.T) {
	g := NewWithT(t)
	g.Expect(CertKey).To(Equal(corev1.TLSCertKey))
	g.Expect(KeyKey).To(Equal(corev1.TLSPrivateKeyKey))
}

// A certificate's names are listed in full up to namesShown, and the rest
// counted.
func TestSomeOfACertificatesNamesAreShown(t *testing.T) {
	g := NewWithT(t)
	g.Expect(someOf([]string{"a", "b", "c", "d", "e"})).To(Equal("a, b, c, d, e"))
	g.Expect(someOf([]string{"a", "b", "c", "d", "e", "f", "g"})).To(Equal("a, b, c, d, e and 2 more"))
}
