//go:build integration

package memcached_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testcerts"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

// memcached's certificate is checked against the time and the Service's
// name: an expired one, one not valid yet and one for another name are
// held back and named; a valid one shows its expiry in the status, and one
// that should have been renewed by now is told once in a Warning event.
func TestCertificatesAreCheckedForTimeAndName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	ca, err := testcerts.NewCA("ca")
	g.Expect(err).NotTo(HaveOccurred())
	now := time.Now()
	issue := func(hosts []string, from, to time.Time) testcerts.Pair {
		p, err := ca.IssueValid("cache", hosts, from, to)
		g.Expect(err).NotTo(HaveOccurred())
		return p
	}
	names := testcerts.ServiceHosts(ns, "cache")
	secret := ca.Secret(ns, "cache-tls", issue(names, now.Add(-48*time.Hour), now.Add(-time.Hour)))
	g.Expect(k8s.Create(ctx, secret)).To(Succeed())
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "cache-tls"}})
	got := heldFor(t, m, cachev1alpha1.ReasonSecretInvalid, "Secret cache-tls cannot serve as memcached's certificate and key: the certificate in tls.crt expired at ")
	g.Expect(got.Status.TLS).To(BeNil())

	update := func(p testcerts.Pair) {
		t.Helper()
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
		secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey] = p.Cert, p.Key
		g.Expect(k8s.Update(ctx, secret)).To(Succeed())
	}
	update(issue(names, now.Add(time.Hour), now.Add(48*time.Hour)))
	heldFor(t, m, cachev1alpha1.ReasonSecretInvalid, "the certificate in tls.crt is not valid before ")
	update(issue(testcerts.ServiceHosts(ns, "other"), now.Add(-time.Hour), now.Add(48*time.Hour)))
	heldFor(t, m, cachev1alpha1.ReasonSecretInvalid, "the certificate in tls.crt does not name cache."+ns+".svc, the Service's name that clients verify")

	valid := issue(names, now.Add(-time.Hour), now.Add(90*24*time.Hour))
	update(valid)
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, cachev1alpha1.ConditionDegraded)).To(BeTrue())
		g.Expect(got.Status.TLS).NotTo(BeNil())
		g.Expect(got.Status.TLS.NotAfter.Time).To(BeTemporally("~", now.Add(90*24*time.Hour), time.Second))
		g.Expect(got.Status.TLS.ExpiresSoon).To(BeFalse())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	g.Expect(events(t, ns, "cache", cachev1alpha1.ReasonCertificateExpiring)).To(BeEmpty())

	// An hour-long certificate with 5 minutes left: inside its window
	// (10 minutes, a sixth of its life).
	update(issue(names, now.Add(-55*time.Minute), now.Add(5*time.Minute)))
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(got.Status.TLS).NotTo(BeNil())
		g.Expect(got.Status.TLS.ExpiresSoon).To(BeTrue())
		g.Expect(events(t, ns, "cache", cachev1alpha1.ReasonCertificateExpiring)).To(ConsistOf(
			HaveField("Note", ContainSubstring("The certificate of Secret cache-tls expires at "))))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	g.Consistently(func() []eventsv1.Event {
		return events(t, ns, "cache", cachev1alpha1.ReasonCertificateExpiring)
	}).WithTimeout(3*time.Second).WithPolling(poll).Should(HaveLen(1), "told once")
}

// A certificate's time is followed as it passes, with no event and no
// resync to help: the operator looks again at the moments its certificate
// becomes valid, enters its expiring window and expires. A short-lived
// certificate (36 s, so a window of 6 s) makes them seconds apart.
func TestCertificateTimeIsFollowedAsItPasses(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	ca, err := testcerts.NewCA("ca")
	g.Expect(err).NotTo(HaveOccurred())
	// A certificate's times are whole seconds.
	valid := time.Now().Truncate(time.Second).Add(15 * time.Second)
	expires := valid.Add(36 * time.Second)
	warns := expires.Add(-6 * time.Second)
	p, err := ca.IssueValid("cache", testcerts.ServiceHosts(ns, "cache"), valid, expires)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8s.Create(ctx, ca.Secret(ns, "cache-tls", p))).To(Succeed())
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), TLS: &cachev1alpha1.TLSSpec{SecretName: "cache-tls"}})
	heldFor(t, m, cachev1alpha1.ReasonSecretInvalid, "the certificate in tls.crt is not valid before ")
	g.Expect(time.Now()).To(BeTemporally("<", valid), "the test's setup took too long to see the certificate before its time")

	// until waits until the status satisfies ok, and no longer than
	// atOnce after the moment at; it returns when it saw it.
	got := &cachev1alpha1.Memcached{}
	until := func(at time.Time, what string, ok func(g Gomega)) time.Time {
		t.Helper()
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			ok(g)
		}).WithTimeout(time.Until(at)+atOnce).WithPolling(poll).Should(Succeed(), what)
		return time.Now()
	}
	seen := until(valid, "served once valid", func(g Gomega) {
		g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, cachev1alpha1.ConditionDegraded)).To(BeTrue())
		g.Expect(got.Status.TLS).NotTo(BeNil())
		g.Expect(got.Status.TLS.ExpiresSoon).To(BeFalse())
	})
	g.Expect(seen).To(BeTemporally(">=", valid), "not before the certificate is valid")
	seen = until(warns, "said to expire soon once in its window", func(g Gomega) {
		g.Expect(got.Status.TLS).NotTo(BeNil())
		g.Expect(got.Status.TLS.ExpiresSoon).To(BeTrue())
		g.Expect(events(t, ns, "cache", cachev1alpha1.ReasonCertificateExpiring)).To(HaveLen(1))
	})
	g.Expect(seen).To(BeTemporally(">=", warns), "not before its window")
	seen = until(expires, "held once expired", func(g Gomega) {
		c := meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionDegraded)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonSecretInvalid))
		g.Expect(c.Message).To(ContainSubstring("the certificate in tls.crt expired at "))
	})
	g.Expect(seen).To(BeTemporally(">=", expires), "not before it expires")
}
