//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testcerts"
	"github.com/example/memcached-operator/internal/testsupport/tutorial"
	"github.com/example/memcached-operator/pkg/desired"
)

// The stories of this file are memcached's own TLS and authentication, on
// the real node; the test process is the client, on the node's host,
// which reaches pod addresses.

// readyPodAddresses are the addresses ("ip:port") of the Memcached's pods
// that are ready and not being deleted. (The Service's EndpointSlices follow them a
// moment later: in the moment between a new pod's readiness and its
// endpoint, they may list one pod fewer.)
func readyPodAddresses(ctx context.Context, c client.Client, key client.ObjectKey) ([]string, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(key.Namespace)); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range tutorial.ReadyPods(pods.Items, key.Name) {
		out = append(out, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(desired.DefaultContainerPort))))
	}
	return out, nil
}

// tlsSecret makes a CA and the kubernetes.io/tls Secret "<name>-tls" of
// the Memcached key's Service, as cert-manager would, and returns the CA.
func tlsSecret(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey) *testcerts.CA {
	t.Helper()
	ca, server, err := testcerts.ForService(key.Namespace, key.Name)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(c.Create(ctx, ca.Secret(key.Namespace, key.Name+"-tls", server))).To(Succeed())
	return ca
}

// usersSecret makes the Secret "<name>-users" whose authentication file
// lets user in with password.
func usersSecret(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey, user, password string) {
	t.Helper()
	NewWithT(t).Expect(c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name + "-users"},
		Data:       map[string][]byte{"authfile": authFile(user, password)},
	})).To(Succeed())
}

// session is one client connection to memcached: over TLS when tlsConf is
// set, authenticated first when user is set; it sends lines and returns
// what memcached answered until it closed the connection (after quit).
type session struct {
	tls            *tls.Config
	user, password string
}

func (s session) run(addr string, lines ...string) (string, error) {
	d := &net.Dialer{Timeout: 2 * time.Second}
	var conn net.Conn
	var err error
	if s.tls != nil {
		conn, err = tls.DialWithDialer(d, "tcp", addr, s.tls)
	} else {
		conn, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	var req strings.Builder
	if s.user != "" {
		token := s.user + " " + s.password
		fmt.Fprintf(&req, "set auth 0 0 %d\r\n%s\r\n", len(token), token)
	}
	for _, l := range lines {
		req.WriteString(l + "\r\n")
	}
	req.WriteString("quit\r\n")
	if _, err := io.WriteString(conn, req.String()); err != nil {
		return "", err
	}
	out, err := io.ReadAll(conn)
	return string(out), err
}

// clientTLS trusts ca and names the Memcached's Service, as a client in
// the cluster would; with a client certificate when pair is not nil.
func clientTLS(ca *testcerts.CA, key client.ObjectKey, pair *testcerts.Pair) *tls.Config {
	conf := &tls.Config{RootCAs: ca.Pool(), ServerName: key.Name + "." + key.Namespace + ".svc", MinVersion: tls.VersionTLS12}
	if pair != nil {
		cert, err := pair.TLS()
		if err != nil {
			panic(err)
		}
		// Presented whatever CAs memcached says it accepts (Go's client
		// sends none of another CA otherwise): a client holding a
		// certificate of a CA memcached should not trust would.
		conf.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return conf
}

// putCertificate writes pair into the kubernetes.io/tls Secret key, as a
// renewal does.
func putCertificate(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey, pair testcerts.Pair) {
	t.Helper()
	g := NewWithT(t)
	secret := &corev1.Secret{}
	g.Expect(c.Get(ctx, key, secret)).To(Succeed())
	secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey] = pair.Cert, pair.Key
	g.Expect(c.Update(ctx, secret)).To(Succeed())
}

// authFile is an authentication file with one user.
func authFile(user, password string) []byte { return []byte(user + ":" + password + "\n") }

// TLS with client certificates required, and authentication: a client
// with the cluster's CA, a certificate and the password stores and reads
// a value on every pod; a plain-text client, a client without a
// certificate and a client with a wrong password are refused.
func TestTLSAndAuthentication(t *testing.T) {
	t.Parallel()
	var ns string
	var ca *testcerts.CA
	var clientPair testcerts.Pair
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "secure"} }
	f := features.New("only clients with the certificate and the password get in").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			ns = namespace(t, cfg, "tls")
			ca = tlsSecret(ctx, t, c, key())
			usersSecret(ctx, t, c, key(), "app", "correct-horse")
			var err error
			clientPair, err = ca.Issue("app", nil, x509.ExtKeyUsageClientAuth)
			g.Expect(err).NotTo(HaveOccurred())
			spec := onRealNode(2)
			spec.TLS = &cachev1alpha1.TLSSpec{SecretName: "secure-tls", ClientCertificates: cachev1alpha1.ClientCertificatesRequire}
			spec.Auth = &cachev1alpha1.AuthSpec{SecretName: "secure-users"}
			runningMemcached(t, cfg, key(), spec)
			return ctx
		}).
		Assess("a client with the CA, a certificate and the password stores and reads on every pod", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g := NewWithT(t)
			addrs, err := readyPodAddresses(ctx, kube(t, cfg), key())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(addrs).To(HaveLen(2))
			good := session{tls: clientTLS(ca, key(), &clientPair), user: "app", password: "correct-horse"}
			for _, addr := range addrs {
				out, err := good.run(addr, "set greeting 0 0 5", "hello", "get greeting")
				g.Expect(err).NotTo(HaveOccurred(), addr)
				g.Expect(out).To(Equal("STORED\r\nSTORED\r\nVALUE greeting 0 5\r\nhello\r\nEND\r\n"), addr)
			}
			return ctx
		}).
		Assess("plain text, no client certificate, a wrong password: refused", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g := NewWithT(t)
			addrs, err := readyPodAddresses(ctx, kube(t, cfg), key())
			g.Expect(err).NotTo(HaveOccurred())
			addr := addrs[0]

			out, _ := session{user: "app", password: "correct-horse"}.run(addr, "version")
			g.Expect(out).NotTo(ContainSubstring("STORED"), "plain text")
			g.Expect(out).NotTo(ContainSubstring("VERSION"), "plain text")

			out, err = session{tls: clientTLS(ca, key(), nil), user: "app", password: "correct-horse"}.run(addr, "version")
			g.Expect(err).To(HaveOccurred(), "without a client certificate, got %q", out)
			g.Expect(out).NotTo(ContainSubstring("VERSION"))

			other, err := testcerts.NewCA("other-ca")
			g.Expect(err).NotTo(HaveOccurred())
			foreign, err := other.Issue("app", nil, x509.ExtKeyUsageClientAuth)
			g.Expect(err).NotTo(HaveOccurred())
			out, err = session{tls: clientTLS(ca, key(), &foreign), user: "app", password: "correct-horse"}.run(addr, "version")
			g.Expect(err).To(HaveOccurred(), "with a certificate of another CA, got %q", out)

			// memcached answers a failed authentication with an error and
			// then ignores the connection (quit included) until it times out.
			out, _ = session{tls: clientTLS(ca, key(), &clientPair), user: "app", password: "wrong"}.run(addr, "version")
			g.Expect(out).To(HavePrefix("CLIENT_ERROR "), "a wrong password")
			g.Expect(out).NotTo(ContainSubstring("VERSION"))

			out, _ = session{tls: clientTLS(ca, key(), &clientPair)}.run(addr, "get greeting")
			g.Expect(out).To(HavePrefix("CLIENT_ERROR unauthenticated"), "no password at all")
			g.Expect(out).NotTo(ContainSubstring("VALUE"))
			return ctx
		}).
		Assess("the discovery endpoint asks the same, then serves the slots and memcached", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			addrs, err := readyPodAddresses(ctx, c, key())
			g.Expect(err).NotTo(HaveOccurred())
			good := session{tls: clientTLS(ca, key(), &clientPair), user: "app", password: "correct-horse"}
			slots := []string{desired.SlotHost("secure", ns, 0), desired.SlotHost("secure", ns, 1)}
			for _, addr := range addrs {
				host, _, _ := net.SplitHostPort(addr)
				endpoint := net.JoinHostPort(host, strconv.Itoa(int(desired.DiscoveryPort)))
				g.Eventually(func(g Gomega) {
					out, err := good.run(endpoint, "config get cluster", "get greeting")
					g.Expect(err).NotTo(HaveOccurred(), endpoint)
					g.Expect(out).To(HavePrefix("STORED\r\nCONFIG cluster 0 "), "the login, memcached's answer, then the membership")
					for _, slot := range slots {
						g.Expect(out).To(ContainSubstring(slot+"|"), "slot %s listed", slot)
					}
					g.Expect(out).To(HaveSuffix("END\r\nVALUE greeting 0 5\r\nhello\r\nEND\r\n"), "then memcached's own answer")
				}).WithTimeout(membershipWithin).WithPolling(2 * time.Second).Should(Succeed())
				out, _ := session{tls: clientTLS(ca, key(), &clientPair)}.run(endpoint, "config get cluster")
				g.Expect(out).To(HavePrefix("CLIENT_ERROR unauthenticated"), "no password")
				out, err := session{tls: clientTLS(ca, key(), nil), user: "app", password: "correct-horse"}.run(endpoint, "config get cluster")
				g.Expect(err).To(HaveOccurred(), "without a client certificate, got %q", out)
				g.Expect(out).NotTo(ContainSubstring("CONFIG"))
			}
			m := &cachev1alpha1.Memcached{}
			g.Expect(c.Get(ctx, key(), m)).To(Succeed())
			g.Expect(m.Status.Discovery).NotTo(BeNil())
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// probe asks every ready pod of the Memcached, every 100 ms, for
// memcached's version, over TLS with ca and with any of the passwords it
// knows; it records how many answered per sample.
type probe struct {
	mu        sync.Mutex
	passwords []string
	samples   []int
	errs      []string
}

func (p *probe) know(password string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.passwords = append(p.passwords, password)
}

func (p *probe) run(ctx context.Context, c client.Client, key client.ObjectKey, tlsConf *tls.Config) {
	for ctx.Err() == nil {
		addrs, err := readyPodAddresses(ctx, c, key)
		if err != nil {
			p.pause(ctx)
			continue
		}
		p.mu.Lock()
		passwords := append([]string(nil), p.passwords...)
		p.mu.Unlock()
		n := 0
		var failures []string
		for _, addr := range addrs {
			var tries []string
			// The newest first: a refused password costs a timeout. Twice
			// over, as a client that knows both would: memcached switches
			// from the old file to the new at once, which may fall between
			// two tries (the new one refused just before, the old just after).
		tries:
			for range 2 {
				for _, pw := range slices.Backward(passwords) {
					out, err := session{tls: tlsConf, user: "app", password: pw}.run(addr, "version")
					if err == nil && strings.Contains(out, "VERSION ") {
						tries = nil
						n++
						break tries
					}
					tries = append(tries, fmt.Sprintf("%s: %q %v", addr, out, err))
				}
			}
			failures = append(failures, tries...)
		}
		p.mu.Lock()
		p.samples = append(p.samples, n)
		if n < len(addrs) {
			p.errs = append(p.errs, failures...)
		}
		p.mu.Unlock()
		p.pause(ctx)
	}
}

// pause waits the time between two samples, or until ctx is done.
func (p *probe) pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(100 * time.Millisecond):
	}
}

// sampled waits until the probe has taken n samples more than it had
// taken when called.
func (p *probe) sampled(t *testing.T, n int) {
	t.Helper()
	p.mu.Lock()
	from := len(p.samples)
	p.mu.Unlock()
	NewWithT(t).Eventually(func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.samples) - from
	}).WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(BeNumerically(">=", n), "the probe samples")
}

// secretsWithin bounds how long new content of a Secret takes to be
// loaded by memcached in every pod: the operator tells each pod of it, the
// kubelet writes it at once, the reloader has memcached load it. The rest
// is slack for a busy machine.
const secretsWithin = 30 * time.Second

// A certificate re-issued into the same Secret, then a new password, are
// loaded in place: no pod restarts, every key stored before is still there,
// and a client with the cluster's CA that knows the old and the new password
// finds never fewer than size ready pods, each answering, from before the
// first change until after the second; afterwards every pod presents the
// new certificate and takes the new password only.
func TestSecretRotationKeepsServing(t *testing.T) {
	t.Parallel()
	var ns string
	var ca *testcerts.CA
	const size, keys = 2, 200
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "rotated"} }
	f := features.New("rotating the certificate and the password keeps the cache and its keys").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := kube(t, cfg)
			ns = namespace(t, cfg, "rotation")
			ca = tlsSecret(ctx, t, c, key())
			usersSecret(ctx, t, c, key(), "app", "first")
			spec := onRealNode(size)
			spec.TLS = &cachev1alpha1.TLSSpec{SecretName: "rotated-tls"}
			spec.Auth = &cachev1alpha1.AuthSpec{SecretName: "rotated-users"}
			runningMemcached(t, cfg, key(), spec)
			return ctx
		}).
		Assess("every ready pod answers throughout, no pod restarts, every key stays; then the new material only", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			tlsConf := clientTLS(ca, key(), nil)
			before := podStarts(ctx, t, c, key())
			g.Expect(before).To(HaveLen(size))
			addrs, err := readyPodAddresses(ctx, c, key())
			g.Expect(err).NotTo(HaveOccurred())
			stored := storeKeys(t, addrs, session{tls: tlsConf, user: "app", password: "first"}, keys)

			p := &probe{passwords: []string{"first"}}
			probeCtx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); p.run(probeCtx, c, key(), tlsConf) }()
			p.sampled(t, 20) // before the first change

			// The certificate is re-issued into the same Secret.
			start := time.Now()
			renewed, err := ca.IssueForService(ns, key().Name)
			g.Expect(err).NotTo(HaveOccurred())
			putCertificate(ctx, t, c, client.ObjectKey{Namespace: ns, Name: "rotated-tls"}, renewed)
			renewedLeaf, err := tls.X509KeyPair(renewed.Cert, renewed.Key)
			g.Expect(err).NotTo(HaveOccurred())
			// The operator tells each pod of the new content (an
			// annotation), on which the kubelet places the new files at
			// once rather than at its next sync of the pod (a minute or
			// more); then the reloader has memcached load them.
			g.Eventually(func(g Gomega) {
				for _, addr := range addrs {
					conn, err := tls.Dial("tcp", addr, tlsConf)
					g.Expect(err).NotTo(HaveOccurred())
					presented := conn.ConnectionState().PeerCertificates[0].Raw
					_ = conn.Close()
					g.Expect(presented).To(Equal(renewedLeaf.Certificate[0]), "%s presents the new certificate", addr)
				}
			}).WithTimeout(secretsWithin).WithPolling(time.Second).Should(Succeed())
			t.Logf("certificate rotation: every pod serves the new certificate %s after the Secret's update", time.Since(start).Round(time.Second))

			// The password changes; clients learn the new one.
			start = time.Now()
			p.know("second")
			users := &corev1.Secret{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rotated-users"}, users)).To(Succeed())
			users.Data["authfile"] = authFile("app", "second")
			g.Expect(c.Update(ctx, users)).To(Succeed())
			g.Eventually(func(g Gomega) {
				for _, addr := range addrs {
					out, _ := session{tls: tlsConf, user: "app", password: "second"}.run(addr, "version")
					g.Expect(out).To(HavePrefix("STORED\r\nVERSION "), "%s takes the new password", addr)
				}
			}).WithTimeout(secretsWithin).WithPolling(time.Second).Should(Succeed())
			t.Logf("password rotation: every pod takes the new password %s after the Secret's update", time.Since(start).Round(time.Second))
			p.sampled(t, 20) // after the last change
			stop()
			<-done

			p.mu.Lock()
			samples, errs := p.samples, p.errs
			p.mu.Unlock()
			// 20 before the first change, 20 after the last, and those
			// between (each rotation takes seconds: the kubelet is told).
			g.Expect(len(samples)).To(BeNumerically(">=", 40), "sampled throughout")
			lowest, highest := size, 0
			for _, n := range samples {
				lowest, highest = min(lowest, n), max(highest, n)
			}
			t.Logf("%d samples, %d to %d ready pods answering", len(samples), lowest, highest)
			g.Expect(lowest).To(BeNumerically(">=", size), "never fewer than size pods serving; failures: %v", errs)

			// The same pods, not restarted, with every key; the old password
			// refused.
			g.Expect(podStarts(ctx, t, c, key())).To(Equal(before), "no pod replaced or restarted")
			kept := stored(session{tls: tlsConf, user: "app", password: "second"})
			t.Logf("%d of %d keys kept through both rotations", kept, keys)
			g.Expect(kept).To(Equal(keys), "every key kept")
			for _, addr := range addrs {
				out, _ := session{tls: tlsConf, user: "app", password: "first"}.run(addr, "version")
				g.Expect(out).To(HavePrefix("CLIENT_ERROR "), "the old password is refused")
				g.Expect(out).NotTo(ContainSubstring("VERSION"))
			}
			d := &appsv1.StatefulSet{}
			g.Expect(c.Get(ctx, key(), d)).To(Succeed())
			g.Expect(d.Spec.Template.Annotations).NotTo(HaveKey(desired.AnnotationRestartedFor), "no restart asked for")
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// podStarts are the Memcached's pods by name, each with its UID and how
// often each of its containers restarted: what changes when a pod is
// replaced or a container restarts.
func podStarts(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey) map[string]string {
	t.Helper()
	pods := &corev1.PodList{}
	NewWithT(t).Expect(c.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabels(desired.SelectorLabels(mustGet(t, c, key))))).To(Succeed())
	out := map[string]string{}
	for _, p := range pods.Items {
		v := string(p.UID)
		for _, st := range p.Status.ContainerStatuses {
			v += fmt.Sprintf(" %s:%d", st.Name, st.RestartCount)
		}
		out[p.Name] = v
	}
	return out
}

// storeKeys stores n keys, spread over addrs, and returns how many of them
// a later session reads back with their value.
func storeKeys(t *testing.T, addrs []string, s session, n int) func(session) int {
	t.Helper()
	for i := range n {
		k := fmt.Sprintf("key-%d", i)
		out, err := s.run(addrs[i%len(addrs)], "set "+k+" 0 0 "+strconv.Itoa(len(k)), k)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(out).To(HaveSuffix("STORED\r\n"), k)
	}
	return func(s session) int {
		kept := 0
		for i := range n {
			k := fmt.Sprintf("key-%d", i)
			out, err := s.run(addrs[i%len(addrs)], "get "+k)
			if err == nil && strings.Contains(out, "VALUE "+k+" 0 "+strconv.Itoa(len(k))+"\r\n"+k+"\r\n") {
				kept++
			}
		}
		return kept
	}
}

// When a pod cannot load new content in place, the operator restarts the
// pods, one at a time, to mount it, and says so: here memcached verifies
// clients, and the Secret's new certificate is of a CA its ca.crt does not
// hold, so the reloader's own connection with it is refused.
func TestAFailedReloadRestartsThePods(t *testing.T) {
	t.Parallel()
	var ns string
	const size = 2
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "unreloadable"} }
	f := features.New("a reload that cannot be confirmed restarts the pods").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns = namespace(t, cfg, "reload-fails")
			tlsSecret(ctx, t, kube(t, cfg), key())
			spec := onRealNode(size)
			spec.TLS = &cachev1alpha1.TLSSpec{SecretName: "unreloadable-tls", ClientCertificates: cachev1alpha1.ClientCertificatesRequire}
			runningMemcached(t, cfg, key(), spec)
			return ctx
		}).
		Assess("the pods restart with the new content, with an event and a reason", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			before := podStarts(ctx, t, c, key())
			other, err := testcerts.NewCA("other-ca")
			g.Expect(err).NotTo(HaveOccurred())
			foreign, err := other.IssueForService(ns, key().Name)
			g.Expect(err).NotTo(HaveOccurred())
			seen := startWatch(t, c, key())
			putCertificate(ctx, t, c, client.ObjectKey{Namespace: ns, Name: "unreloadable-tls"}, foreign)
			start := time.Now()

			g.Eventually(func(g Gomega) {
				d := &appsv1.StatefulSet{}
				g.Expect(c.Get(ctx, key(), d)).To(Succeed())
				g.Expect(d.Spec.Template.Annotations).To(HaveKey(desired.AnnotationRestartedFor))
			}).WithTimeout(4*time.Minute).WithPolling(time.Second).Should(Succeed(), "the operator restarts the pods")
			t.Logf("restart asked for %s after the Secret's update", time.Since(start).Round(time.Second))
			events(t, cfg, key(), cachev1alpha1.ReasonReloadFailed)
			reloadFailedSays(ctx, t, c, ns, "could not load the new Secret content in place", "memcached did not load the new certificate")

			// Every pod replaced, the new certificate served.
			foreignLeaf, err := tls.X509KeyPair(foreign.Cert, foreign.Key)
			g.Expect(err).NotTo(HaveOccurred())
			g.Eventually(func(g Gomega) {
				addrs := replacedAddresses(ctx, g, t, c, key(), size, before)
				for _, addr := range addrs {
					conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served certificate
					g.Expect(err).NotTo(HaveOccurred(), "a TLS 1.3 handshake completes before memcached asks for the client certificate")
					g.Expect(conn.ConnectionState().PeerCertificates[0].Raw).To(Equal(foreignLeaf.Certificate[0]), addr)
					_ = conn.Close()
				}
			}).WithTimeout(2 * timeout).WithPolling(time.Second).Should(Succeed())

			// The status said why the pods restart while they did.
			var said *metav1.Condition
			for _, m := range seen.stop() {
				if p := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionProgressing); p != nil && p.Reason == cachev1alpha1.ReasonReloadFailed {
					said = p
					break
				}
			}
			g.Expect(said).NotTo(BeNil(), "Progressing said ReloadFailed during the restart")
			g.Expect(said.Message).To(ContainSubstring("could not load the new Secret content in place"))

			// Once per content: the new pods, which mounted it, are not
			// restarted again, and no second event comes.
			d := &appsv1.StatefulSet{}
			g.Expect(c.Get(ctx, key(), d)).To(Succeed())
			restartedFor := d.Spec.Template.Annotations[desired.AnnotationRestartedFor]
			pods := podStarts(ctx, t, c, key())
			g.Consistently(func(g Gomega) {
				g.Expect(c.Get(ctx, key(), d)).To(Succeed())
				g.Expect(d.Spec.Template.Annotations[desired.AnnotationRestartedFor]).To(Equal(restartedFor))
				g.Expect(podStarts(ctx, t, c, key())).To(Equal(pods), "no pod restarted again")
			}).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
			events(t, cfg, key(), cachev1alpha1.ReasonReloadFailed)
			emittedOnce(t, cfg, key(), cachev1alpha1.ReasonReloadFailed)
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// emittedOnce checks that the one event on the Memcached key with reason
// was emitted once: the events recorder writes a second emission that
// differs only in its note into the same Event, as a series.
func emittedOnce(t *testing.T, cfg *envconf.Config, key client.ObjectKey, reason string) {
	t.Helper()
	g := NewWithT(t)
	found := eventsOf(g, t, cfg, key, reason)
	g.Expect(found).To(HaveLen(1))
	g.Expect(found[0].Series).To(BeNil(), "emitted once, not as a series")
}

// A CA taken out of ca.crt is no longer trusted: memcached's refresh_certs
// cannot remove a CA, so the reloader does not reload it in place and the
// pods restart; afterwards a client certificate of the removed CA is
// refused on every pod, and one of the new CA gets in.
func TestARemovedCAIsNoLongerTrusted(t *testing.T) {
	t.Parallel()
	var ns string
	var oldCA *testcerts.CA
	const size = 2
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "ca-rotation"} }
	f := features.New("a CA removed from ca.crt stops being trusted").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns = namespace(t, cfg, "ca-removed")
			oldCA = tlsSecret(ctx, t, kube(t, cfg), key())
			spec := onRealNode(size)
			spec.TLS = &cachev1alpha1.TLSSpec{SecretName: "ca-rotation-tls", ClientCertificates: cachev1alpha1.ClientCertificatesRequire}
			runningMemcached(t, cfg, key(), spec)
			return ctx
		}).
		Assess("the pods restart, and the old CA's clients are refused", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			oldClient, err := oldCA.Issue("app", nil, x509.ExtKeyUsageClientAuth)
			g.Expect(err).NotTo(HaveOccurred())
			addrs, err := readyPodAddresses(ctx, c, key())
			g.Expect(err).NotTo(HaveOccurred())
			for _, addr := range addrs {
				out, err := session{tls: clientTLS(oldCA, key(), &oldClient)}.run(addr, "version")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(out).To(HavePrefix("VERSION"), "the old CA's client before the rotation, on %s", addr)
			}
			before := podStarts(ctx, t, c, key())

			newCA, err := testcerts.NewCA("new-ca")
			g.Expect(err).NotTo(HaveOccurred())
			server, err := newCA.IssueForService(ns, key().Name)
			g.Expect(err).NotTo(HaveOccurred())
			newClient, err := newCA.Issue("app", nil, x509.ExtKeyUsageClientAuth)
			g.Expect(err).NotTo(HaveOccurred())
			secret := &corev1.Secret{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ca-rotation-tls"}, secret)).To(Succeed())
			secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey], secret.Data["ca.crt"] = server.Cert, server.Key, newCA.PEM
			g.Expect(c.Update(ctx, secret)).To(Succeed())

			events(t, cfg, key(), cachev1alpha1.ReasonReloadFailed)
			reloadFailedSays(ctx, t, c, ns, "ca.crt no longer holds CN="+key().Name+"-ca")
			emittedOnce(t, cfg, key(), cachev1alpha1.ReasonReloadFailed)
			g.Eventually(func(g Gomega) {
				addrs := replacedAddresses(ctx, g, t, c, key(), size, before)
				g.Expect(addrs).To(HaveLen(size))
				for _, addr := range addrs {
					out, err := session{tls: clientTLS(newCA, key(), &newClient)}.run(addr, "version")
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(out).To(HavePrefix("VERSION"), "the new CA's client on %s", addr)
					out, _ = session{tls: clientTLS(newCA, key(), &oldClient)}.run(addr, "version")
					g.Expect(out).NotTo(ContainSubstring("VERSION"), "the removed CA's client on %s", addr)
				}
			}).WithTimeout(2 * timeout).WithPolling(time.Second).Should(Succeed())
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// reloadFailedSays checks that every ReloadFailed event of namespace ns
// says each of says.
func reloadFailedSays(ctx context.Context, t *testing.T, c client.Client, ns string, says ...string) {
	t.Helper()
	g := NewWithT(t)
	list := &eventsv1.EventList{}
	g.Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	for _, e := range list.Items {
		if e.Reason == cachev1alpha1.ReasonReloadFailed {
			t.Logf("event: %s", e.Note)
			for _, s := range says {
				g.Expect(e.Note).To(ContainSubstring(s))
			}
		}
	}
}

// replacedAddresses is, for an Eventually, the addresses of the Memcached
// key's ready pods once it has converged with size pods, none of them one
// of before.
func replacedAddresses(ctx context.Context, g Gomega, t *testing.T, c client.Client, key client.ObjectKey, size int32, before map[string]string) []string {
	converged(t, c, key, size)
	now := podStarts(ctx, t, c, key)
	g.Expect(now).To(HaveLen(int(size)))
	for name, started := range now {
		uid, _, _ := strings.Cut(started, " ")
		g.Expect(before[name]).NotTo(HavePrefix(uid+" "), "pod %s replaced (a new pod in the same slot)", name)
	}
	addrs, err := readyPodAddresses(ctx, c, key)
	g.Expect(err).NotTo(HaveOccurred())
	return addrs
}

// With TLS and client certificates required, the exporter scrapes memcached
// over TLS with the pod's own certificate: memcached_up is 1.
func TestExporterScrapesOverTLS(t *testing.T) {
	t.Parallel()
	var ns string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "metered"} }
	f := features.New("the exporter scrapes a TLS memcached").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns = namespace(t, cfg, "tls-metrics")
			tlsSecret(ctx, t, kube(t, cfg), key())
			spec := onRealNode(1)
			spec.TLS = &cachev1alpha1.TLSSpec{SecretName: "metered-tls", ClientCertificates: cachev1alpha1.ClientCertificatesRequire}
			spec.Monitoring = &cachev1alpha1.MonitoringSpec{Enabled: true}
			runningMemcached(t, cfg, key(), spec)
			return ctx
		}).
		Assess("memcached_up is 1", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g := NewWithT(t)
			addrs, err := readyPodAddresses(ctx, kube(t, cfg), key())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(addrs).To(HaveLen(1))
			host, _, _ := net.SplitHostPort(addrs[0])
			url := "http://" + net.JoinHostPort(host, strconv.Itoa(int(desired.MetricsPort))) + "/metrics"
			g.Eventually(func(g Gomega) {
				resp, err := http.Get(url)
				g.Expect(err).NotTo(HaveOccurred())
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(string(body)).To(MatchRegexp(`(?m)^memcached_up 1$`))
			}).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// A certificate that has expired is reported, naming the Secret, and not
// served: the kubelet places it in the pods all the same, and the reloader
// leaves memcached serving the certificate it has, which clients still
// accept.
func TestAnExpiredCertificateIsNotServed(t *testing.T) {
	t.Parallel()
	var ns string
	var ca *testcerts.CA
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "expiring"} }
	f := features.New("an expired certificate is reported and not served").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns = namespace(t, cfg, "expired")
			ca = tlsSecret(ctx, t, kube(t, cfg), key())
			spec := onRealNode(1)
			spec.TLS = &cachev1alpha1.TLSSpec{SecretName: "expiring-tls"}
			runningMemcached(t, cfg, key(), spec)
			return ctx
		}).
		Assess("the status names the Secret and the expiry; memcached keeps its certificate", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			addrs, err := readyPodAddresses(ctx, c, key())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(addrs).To(HaveLen(1))
			tlsConf := clientTLS(ca, key(), nil)
			served := func() []byte {
				conn, err := tls.Dial("tcp", addrs[0], tlsConf)
				g.Expect(err).NotTo(HaveOccurred(), "a client that verifies the certificate connects")
				defer conn.Close()
				return conn.ConnectionState().PeerCertificates[0].Raw
			}
			before := served()
			m := mustGet(t, c, key())
			g.Expect(m.Status.TLS).NotTo(BeNil(), "the status shows the certificate's expiry")
			t.Logf("status.tls: notAfter %s", m.Status.TLS.NotAfter.UTC().Format(time.RFC3339))

			now := time.Now()
			expired, err := ca.IssueValid(key().Name, testcerts.ServiceHosts(ns, key().Name), now.Add(-48*time.Hour), now.Add(-time.Hour))
			g.Expect(err).NotTo(HaveOccurred())
			putCertificate(ctx, t, c, client.ObjectKey{Namespace: ns, Name: "expiring-tls"}, expired)

			g.Eventually(func(g Gomega) {
				g.Expect(c.Get(ctx, key(), m)).To(Succeed())
				d := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionDegraded)
				g.Expect(d).NotTo(BeNil())
				g.Expect(d.Reason).To(Equal(cachev1alpha1.ReasonSecretInvalid))
				g.Expect(d.Message).To(ContainSubstring("Secret expiring-tls cannot serve as memcached's certificate and key: the certificate in tls.crt expired at "))
			}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
			events(t, cfg, key(), cachev1alpha1.ReasonSecretInvalid)

			// The kubelet places the expired certificate in the pod (on its
			// next sync, within about a minute); the reloader says it keeps
			// the one memcached has.
			pods := &corev1.PodList{}
			g.Expect(c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(desired.SelectorLabels(m)))).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Eventually(func(g Gomega) {
				out, err := kubectl(ctx, cfg, "", "logs", "-n", ns, pods.Items[0].Name, "-c", desired.ReloaderContainerName)
				g.Expect(err).NotTo(HaveOccurred(), out)
				g.Expect(out).To(ContainSubstring("the certificate in tls.crt expired at"), "the reloader refuses it by the rule the operator applies")
			}).WithTimeout(3*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "the reloader saw the expired certificate")
			g.Expect(served()).To(Equal(before), "memcached serves the certificate it had")
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
