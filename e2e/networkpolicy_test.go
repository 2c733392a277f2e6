//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
)

// enforcementWait bounds how long a reach script waits for the network
// plugin to apply a NetworkPolicy, or to let a new pod's address in: the
// plugin follows the apiserver, as every implementation does, a moment
// behind.
const enforcementWait = 30

// Reach is what a reach script saw of a port.
const (
	reachOpen   = "open"
	reachClosed = "closed"
)

// reachScript is a shell script that tries attempt (a command that
// succeeds when it reaches its port) once a second until its outcome is
// want (reachOpen or reachClosed) or enforcementWait seconds have passed,
// and prints the last outcome, with the attempt's output: "open: ..." or
// "closed: ...". A policy that admits everything prints "open" however
// long it is given.
func reachScript(want, attempt string) string {
	return fmt.Sprintf(`i=0
while :; do
  if out=$({ %s; } 2>&1); then got=%s; else got=%s; fi
  i=$((i+1))
  if [ "$got" = %q ] || [ "$i" -ge %d ]; then echo "$got: $out" | head -c 400; echo; exit 0; fi
  sleep 1
done`, attempt, reachOpen, reachClosed, want, enforcementWait)
}

// holdOpenScript is a shell script that tries attempt once a second
// until it first succeeds (a new client pod is admitted a moment after it
// starts, as every address is: enforcementWait), then enforcementWait times
// more, and prints "open: ..." when every later attempt succeeded, or
// "closed: ..." with the first that failed. It proves a port stays open
// for as long as the plugin may take to apply a policy already changed.
func holdOpenScript(attempt string) string {
	return fmt.Sprintf(`i=0; held=0
while :; do
  if out=$({ %[1]s; } 2>&1); then
    if [ "$held" -ge %[2]d ]; then echo "%[3]s: $out" | head -c 400; echo; exit 0; fi
    held=$((held+1))
  elif [ "$held" -gt 0 ]; then
    echo "%[4]s after $held seconds open: $out" | head -c 400; echo; exit 0
  fi
  i=$((i+1))
  if [ "$held" -eq 0 ] && [ "$i" -ge %[2]d ]; then echo "%[4]s: never open: $out" | head -c 400; echo; exit 0; fi
  sleep 1
done`, attempt, enforcementWait, reachOpen, reachClosed)
}

// memcachedVersion is an attempt that asks memcached at addr its version.
func memcachedVersion(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf(`printf 'version\r\nquit\r\n' | nc -w 3 %s %s`, host, port)
}

// httpGet is an attempt that fetches url, in at most 5 seconds (busybox's
// own wget -T crashes), saying "timed out" when it took longer.
func httpGet(url string) string {
	return fmt.Sprintf(`timeout 5 wget -O - %s; rc=$?; [ $rc -lt 124 ] || echo "wget: timed out"; exit $rc`, url)
}

// tcpConnect is an attempt that opens a TCP connection to host:port and
// closes it.
func tcpConnect(host string, port int) string {
	return fmt.Sprintf(`nc -w 3 %s %d </dev/null`, host, port)
}

// refusedByTheNetwork matches a closed reach whose connection was never
// made: refused by the kernel (kube-router answers a packet its policy
// denies with an ICMP port unreachable) or timed out (plugins that drop
// it). memcached itself never refuses a TCP connection it listens for.
const refusedByTheNetwork = `(?s)^closed: .*(Connection refused|timed out)`

// A Memcached with spec.networkPolicy is reached only by the clients it
// names, on memcached's port (each pod's own, while a new port rolls out),
// and by the namespaces labelled cache.example.com/metrics: enabled on the
// exporter's; turning the policy off opens it again. The
// real node enforces NetworkPolicies with kube-router (docs/real-node.md).
func TestNetworkPolicyAdmitsOnlyItsClients(t *testing.T) {
	t.Parallel()
	var ns, outside, monitoring, cacheAddr, metricsURL string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "fenced"} }
	web := map[string]string{"app": "web"}
	f := features.New("a NetworkPolicy per Memcached, enforced").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns = namespace(t, cfg, "fenced")
			outside = namespace(t, cfg, "outside")
			monitoring = labelledNamespace(t, cfg, "monitoring", map[string]string{desired.MetricsNamespaceLabel: desired.MetricsNamespaceValue})
			// Two slots: while a new port rolls out, slot 0 keeps the old.
			spec := onRealNode(2)
			spec.Monitoring = &cachev1alpha1.MonitoringSpec{Enabled: true}
			spec.NetworkPolicy = &cachev1alpha1.NetworkPolicySpec{Enabled: true, Clients: []cachev1alpha1.NetworkPolicyPeer{
				{PodSelector: &cachev1alpha1.LabelSelector{MatchLabels: map[string]cachev1alpha1.LabelValue{"app": "web"}}},
			}}
			runningMemcached(t, cfg, key(), spec)
			g, c := NewWithT(t), kube(t, cfg)
			g.Expect(c.Get(ctx, key(), &networkingv1.NetworkPolicy{})).To(Succeed(), "the Memcached's NetworkPolicy")
			g.Eventually(func(g Gomega) {
				addrs, err := readyPodAddresses(ctx, c, key())
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(addrs).To(HaveLen(2))
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			slot0 := &corev1.Pod{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: key().Name + "-0"}, slot0)).To(Succeed())
			cacheAddr = net.JoinHostPort(slot0.Status.PodIP, "11211")
			host, _, _ := net.SplitHostPort(cacheAddr)
			metricsURL = fmt.Sprintf("http://%s/metrics", net.JoinHostPort(host, strconv.Itoa(int(desired.MetricsPort))))
			return ctx
		}).
		Assess("a pod of the namespace without the clients' label gets no connection", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			out := runClient(t, cfg, ns, "stranger", reachScript(reachClosed, memcachedVersion(cacheAddr)))
			NewWithT(t).Expect(out).To(MatchRegexp(refusedByTheNetwork))
			return ctx
		}).
		Assess("a client the policy names stores and reads", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g := NewWithT(t)
			out := runLabelledClient(t, cfg, ns, "web", web, reachScript(reachOpen, memcachedVersion(cacheAddr)))
			g.Expect(out).To(MatchRegexp(`^open: VERSION `))
			out = runLabelledClient(t, cfg, ns, "web-store", web, reachScript(reachOpen, memcachedCommands(cacheAddr, "set greeting 0 0 5", "hello", "get greeting")))
			g.Expect(out).To(HavePrefix("open: STORED"))
			g.Expect(out).To(MatchRegexp(`VALUE greeting 0 5\r?\nhello\r?\n`))
			return ctx
		}).
		Assess("a pod of another namespace gets no connection, even with the clients' label", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			out := runLabelledClient(t, cfg, outside, "web", web, reachScript(reachClosed, memcachedVersion(cacheAddr)))
			NewWithT(t).Expect(out).To(MatchRegexp(refusedByTheNetwork))
			return ctx
		}).
		Assess("the exporter answers the namespace labelled cache.example.com/metrics: enabled and no other", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g := NewWithT(t)
			out := runClient(t, cfg, monitoring, "scraper", reachScript(reachOpen, httpGet(metricsURL)))
			g.Expect(out).To(HavePrefix("open: "))
			g.Expect(out).To(ContainSubstring("# HELP"), "the exporter's page")
			out = runClient(t, cfg, outside, "scraper", reachScript(reachClosed, httpGet(metricsURL)))
			g.Expect(out).To(MatchRegexp(refusedByTheNetwork))
			// A client of memcached is not a metrics client.
			out = runLabelledClient(t, cfg, ns, "web-scraper", web, reachScript(reachClosed, httpGet(metricsURL)))
			g.Expect(out).To(MatchRegexp(refusedByTheNetwork))
			return ctx
		}).
		Assess("while a new containerPort rolls out, the old pod keeps serving its clients on the old port", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			m := &cachev1alpha1.Memcached{}
			g.Expect(c.Get(ctx, key(), m)).To(Succeed())
			// The new pod of the last slot cannot be placed (a node label
			// no node has), so the rollout stops there and slot 0 serves
			// on the old port for as long as the check takes; the policy
			// follows the spec at once.
			g.Expect(c.Patch(ctx, m, client.RawPatch(types.MergePatchType,
				[]byte(`{"spec":{"containerPort":11311,"nodeSelector":{"example.com/nowhere":"true"}}}`)))).To(Succeed())
			g.Eventually(func(g Gomega) {
				np := &networkingv1.NetworkPolicy{}
				g.Expect(c.Get(ctx, key(), np)).To(Succeed())
				g.Expect(np.Spec.Ingress[0].Ports[0].Port.IntValue()).To(Equal(11311))
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "the policy admits the new port")
			// Open for the whole enforcement wait once the new client is
			// admitted: the policy's numeric port is the new one; the old
			// pod is admitted by its port's name.
			out := runLabelledClient(t, cfg, ns, "web-rolling", web, holdOpenScript(memcachedVersion(cacheAddr)))
			g.Expect(out).To(MatchRegexp(`^open: VERSION `))
			// Back as it was: the last slot comes back on the old port.
			g.Expect(c.Get(ctx, key(), m)).To(Succeed())
			g.Expect(c.Patch(ctx, m, client.RawPatch(types.MergePatchType,
				[]byte(`{"spec":{"containerPort":11211,"nodeSelector":{"example.com/nowhere":null}}}`)))).To(Succeed())
			g.Eventually(func(g Gomega) {
				addrs, err := readyPodAddresses(ctx, c, key())
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(addrs).To(HaveLen(2))
				g.Expect(addrs).To(ContainElement(cacheAddr), "slot 0 never restarted")
				d := &appsv1.StatefulSet{}
				g.Expect(c.Get(ctx, key(), d)).To(Succeed())
				g.Expect(d.Status.ReadyReplicas).To(Equal(int32(2)), "the unplaceable pod is gone")
				g.Expect(rolledOut(d)).To(BeTrue())
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			return ctx
		}).
		Assess("turning the policy off lets every pod in", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			m := &cachev1alpha1.Memcached{}
			g.Expect(c.Get(ctx, key(), m)).To(Succeed())
			g.Expect(c.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"networkPolicy":{"enabled":false}}}`)))).To(Succeed())
			g.Eventually(func() bool {
				return apierrors.IsNotFound(c.Get(ctx, key(), &networkingv1.NetworkPolicy{}))
			}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "the NetworkPolicy is deleted")
			out := runClient(t, cfg, outside, "after", reachScript(reachOpen, memcachedVersion(cacheAddr)))
			g.Expect(out).To(MatchRegexp(`^open: VERSION `))
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
