//go:build integration

package memcached_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testcerts"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/desired"
)

// heldFor waits until m reports, in Degraded and Stalled, that a Secret
// holds it back with reason, and a message containing message; an event
// says so too.
func heldFor(t *testing.T, m *cachev1alpha1.Memcached, reason, message string) *cachev1alpha1.Memcached {
	t.Helper()
	got := &cachev1alpha1.Memcached{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		for _, typ := range []string{cachev1alpha1.ConditionDegraded, cachev1alpha1.ConditionStalled} {
			c := meta.FindStatusCondition(got.Status.Conditions, typ)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), typ)
			g.Expect(c.Reason).To(Equal(reason), typ)
			g.Expect(c.Message).To(ContainSubstring(message), typ)
		}
		g.Expect(events(t, m.Namespace, m.Name, reason)).To(ContainElement(HaveField("Note", ContainSubstring(message))))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return got
}

// A Memcached whose Secrets are missing or unusable gets no pods that could
// not start, says why, and recovers as soon as they are fixed; each pod is
// told of new content once, and nothing rolls (the reloader loads it in
// place); other keys' changes tell no pod; a converged Memcached with
// Secrets costs nothing; and Secrets are read one by one, by name.
func TestSecretsGateAndRollThePods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	mark := requests.Mark()
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{
		Size: ptr.To[int32](2),
		TLS:  &cachev1alpha1.TLSSpec{SecretName: "cache-tls", ClientCertificates: cachev1alpha1.ClientCertificatesRequire},
		Auth: &cachev1alpha1.AuthSpec{SecretName: "cache-users"},
	})

	ca, pair, tlsSecret, users := gateUntilTheSecretsAreFit(t, ns, m)
	users.Data["authfile"] = []byte("alice:s3cret\n")
	g.Expect(k8s.Update(ctx, users)).To(Succeed())
	_, dep := converged(t, m)
	tmpl := dep.Spec.Template
	g.Expect(tmpl.Annotations).NotTo(HaveKey(desired.AnnotationTLSDigest), "the content is loaded in place, not rolled out")
	g.Expect(tmpl.Annotations).NotTo(HaveKey(desired.AnnotationAuthDigest))
	g.Expect(tmpl.Spec.Volumes).To(ContainElements(
		HaveField("Secret.SecretName", "cache-tls"),
		HaveField("Secret.SecretName", "cache-users"),
	))
	g.Expect(events(t, ns, m.Name, cachev1alpha1.ReasonSecretMissing)).To(HaveLen(3), "one event per problem, not per reconcile")

	expectSecretsReadByName(t, ns, mark)
	expectNothingSentAtRest(t, ns, dep)

	renewed := expectOnlyNewContentReachesThePods(t, m, ca, tlsSecret, dep)

	// A key that does not match its certificate: the Deployment is held
	// as it is, and keeps serving.
	tlsSecret.Data["tls.key"] = pair.Key
	g.Expect(k8s.Update(ctx, tlsSecret)).To(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), dep)).To(Succeed())
	generation := dep.Generation
	got := heldFor(t, m, cachev1alpha1.ReasonSecretInvalid, "tls.crt and tls.key are not a certificate chain and its key")
	g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue(), "the pods serve on")
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), dep)).To(Succeed())
	g.Expect(dep.Generation).To(Equal(generation))

	// Deleted: recovered from, as soon as it is back.
	g.Expect(k8s.Delete(ctx, tlsSecret)).To(Succeed())
	heldFor(t, m, cachev1alpha1.ReasonSecretMissing, "Secret cache-tls does not exist")
	tlsSecret = ca.Secret(ns, "cache-tls", renewed)
	g.Expect(k8s.Create(ctx, tlsSecret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, cachev1alpha1.ConditionStalled)).To(BeTrue())
		for _, c := range got.Status.Conditions {
			g.Expect(strings.Contains(c.Message, "Secret")).To(BeFalse(), "%s: %s", c.Type, c.Message)
		}
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	converged(t, m)
}

// gateUntilTheSecretsAreFit holds m, which names the TLS Secret cache-tls
// and the authentication Secret cache-users, until both exist and are fit,
// making them step by step, and returns them.
func gateUntilTheSecretsAreFit(t *testing.T, ns string, m *cachev1alpha1.Memcached) (*testcerts.CA, testcerts.Pair, *corev1.Secret, *corev1.Secret) {
	g := NewWithT(t)
	ctx := context.Background()
	// Nothing exists: no Deployment whose pods could never mount.
	got := heldFor(t, m, cachev1alpha1.ReasonSecretMissing, "Secret cache-tls does not exist")
	g.Expect(meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionAvailable).Reason).To(Equal(cachev1alpha1.ReasonSecretMissing))
	g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(m), &appsv1.StatefulSet{}))).To(BeTrue())

	ca, pair, err := testcerts.ForService(ns, "cache")
	g.Expect(err).NotTo(HaveOccurred())
	tlsSecret := ca.Secret(ns, "cache-tls", pair)
	delete(tlsSecret.Data, "ca.crt")
	g.Expect(k8s.Create(ctx, tlsSecret)).To(Succeed())
	heldFor(t, m, cachev1alpha1.ReasonSecretMissing, "Secret cache-tls has no key ca.crt")

	tlsSecret.Data["ca.crt"] = ca.PEM
	g.Expect(k8s.Update(ctx, tlsSecret)).To(Succeed())
	heldFor(t, m, cachev1alpha1.ReasonSecretMissing, "Secret cache-users does not exist")

	users := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache-users"}, Data: map[string][]byte{"authfile": []byte("alice:s3cret")}}
	g.Expect(k8s.Create(ctx, users)).To(Succeed())
	got = heldFor(t, m, cachev1alpha1.ReasonSecretInvalid, "Secret cache-users cannot serve as memcached's authentication file (key authfile): its last line does not end with a newline")
	for _, c := range got.Status.Conditions {
		g.Expect(c.Message).NotTo(ContainSubstring("s3cret"), "a condition never quotes a Secret")
	}

	return ca, pair, tlsSecret, users
}

// expectSecretsReadByName: every request for Secrets since mark named one
// Secret, and each of the two Secrets was read (a check over no request
// would prove nothing).
func expectSecretsReadByName(t *testing.T, ns string, mark int) {
	g := NewWithT(t)
	named := map[string]int{}
	for _, r := range requests.Since(mark, testenv.PathContains("/namespaces/"+ns+"/secrets")) {
		g.Expect(r.Method).To(Equal("GET"), r.String())
		g.Expect(r.Query.Get("fieldSelector")).To(BeElementOf("metadata.name=cache-tls", "metadata.name=cache-users"), r.String())
		named[r.Query.Get("fieldSelector")]++
	}
	g.Expect(named).To(HaveKey("metadata.name=cache-tls"), "the TLS Secret was listed or watched")
	g.Expect(named).To(HaveKey("metadata.name=cache-users"), "the authentication Secret was listed or watched")

}

// expectNothingSentAtRest: a converged Memcached with Secrets costs no
// request, though it is reconciled again.
func expectNothingSentAtRest(t *testing.T, ns string, dep *appsv1.StatefulSet) {
	g := NewWithT(t)
	time.Sleep(time.Second)
	mark := requests.Mark()
	skipped := counterSum(t, "memcached_operator_applies_skipped_total", "kind", "StatefulSet")
	nudge(t, dep) // a reconcile with nothing to do, as a resync's
	time.Sleep(window)
	g.Expect(requests.Since(mark, inNamespace(ns), testenv.NotWatch)).To(BeEmpty(), "a converged Memcached with Secrets costs nothing")
	g.Expect(counterSum(t, "memcached_operator_applies_skipped_total", "kind", "StatefulSet")).To(BeNumerically(">", skipped),
		"the Memcached was reconciled again in the window")

}

// expectOnlyNewContentReachesThePods: a key the pods do not mount changes
// and no pod is told; the certificate is re-issued into the same Secret and
// each pod is told of the new content with one patch, and nothing rolls.
// It returns the new certificate.
func expectOnlyNewContentReachesThePods(t *testing.T, m *cachev1alpha1.Memcached, ca *testcerts.CA, tlsSecret *corev1.Secret, dep *appsv1.StatefulSet) testcerts.Pair {
	g := NewWithT(t)
	ctx := context.Background()
	ns := m.Namespace
	generation := dep.Generation
	told := secretsDigests(t, ns)
	g.Expect(told).To(HaveLen(int(*m.Spec.Size)))
	podPatches := func(mark int) []testenv.Request {
		return requests.Since(mark, inNamespace(ns), testenv.PathContains("/pods/"), testenv.Wrote)
	}
	mark := requests.Mark()
	tlsSecret.Data["unused"] = []byte("x")
	g.Expect(k8s.Update(ctx, tlsSecret)).To(Succeed())
	time.Sleep(window)
	g.Expect(podPatches(mark)).To(BeEmpty(), "a key the pods do not mount")
	g.Expect(secretsDigests(t, ns)).To(Equal(told))

	// The certificate is re-issued into the same Secret: each pod is told.
	mark = requests.Mark()
	renewed, err := ca.IssueForService(ns, "cache")
	g.Expect(err).NotTo(HaveOccurred())
	tlsSecret.Data["tls.crt"], tlsSecret.Data["tls.key"] = renewed.Cert, renewed.Key
	g.Expect(k8s.Update(ctx, tlsSecret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		now := secretsDigests(t, ns)
		g.Expect(now).To(HaveLen(len(told)))
		for pod, d := range now {
			g.Expect(d).NotTo(Equal(told[pod]), pod)
		}
	}).WithTimeout(atOnce).WithPolling(poll).Should(Succeed())
	time.Sleep(window)
	g.Expect(podPatches(mark)).To(HaveLen(len(told)), "one patch per pod")
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), dep)).To(Succeed())
	g.Expect(dep.Generation).To(Equal(generation), "nothing rolls")
	return renewed
}

// secretsDigests are the Secret content digests the pods of ns were told
// of, by pod.
func secretsDigests(t *testing.T, ns string) map[string]string {
	pods := &corev1.PodList{}
	NewWithT(t).Expect(k8s.List(context.Background(), pods, client.InNamespace(ns))).To(Succeed())
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = p.Annotations[desired.AnnotationSecretsDigest]
	}
	return out
}
