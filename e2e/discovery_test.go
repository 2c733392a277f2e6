//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/clusterdns"
	"github.com/example/memcached-operator/internal/testsupport/nodeclient"
	"github.com/example/memcached-operator/internal/testsupport/told"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
)

// membershipWithin bounds how long a change of the membership takes to
// reach every pod's discovery endpoint and a client polling every second:
// the operator applies the ConfigMap and tells each pod of it (an
// annotation), on which the kubelet writes the ConfigMap's content to the
// pod at once, about half a second on the real node, rather than at its
// periodic sync (80 to 85 s measured there). The rest is slack for a busy
// machine.
const membershipWithin = 20 * time.Second

// A client no one here wrote, with ElastiCache's auto discovery (the npm
// package memcached-elasticache), pointed at status.discovery.address and
// nothing else: it finds every slot of the Memcached by its stable name,
// spreads its keys over them, keeps the keys of the slots that stay when a
// pod is replaced (same name, new address), and follows a scale-up, with
// no restart. It runs on this machine, with the cluster's DNS.
func TestAutoDiscoveryClientFollowsTheSlots(t *testing.T) {
	var ns, dnsServer string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "found"} }
	var c *nodeclient.Client
	f := features.New("a client with auto discovery follows the slots").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("resolves the cluster's names with the real node's DNS from this machine: local cluster only")
			}
			ns = namespace(t, cfg, "found")
			runningMemcached(t, cfg, key(), onRealNode(2))
			// The slots' names resolve once the Service's EndpointSlices
			// hold their pods, which may trail the StatefulSet's ready
			// count: a client connecting before then finds no address.
			endpointsReady(t, kube(t, cfg), key(), 2)
			dnsServer = realNodeIP(t, kube(t, cfg))
			// The client lives for the whole feature: each step below uses it.
			m := &cachev1alpha1.Memcached{}
			NewWithT(t).Eventually(func(g Gomega) {
				g.Expect(kube(t, cfg).Get(ctx, key(), m)).To(Succeed())
				g.Expect(m.Status.Discovery).NotTo(BeNil())
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			c = nodeclient.Start(t, m.Status.Discovery.Address, nodeclient.Options{Interval: time.Second, DNSServer: dnsServer})
			return ctx
		}).
		Assess("the status names the endpoint, and every pod serves the membership", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, k := NewWithT(t), kube(t, cfg)
			m := &cachev1alpha1.Memcached{}
			g.Eventually(func(g Gomega) {
				g.Expect(k.Get(ctx, key(), m)).To(Succeed())
				g.Expect(m.Status.Discovery).NotTo(BeNil())
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			g.Expect(m.Status.Discovery.Address).To(Equal(fmt.Sprintf("found.%s.svc:%d", ns, desired.DiscoveryPort)))
			out, err := kubectl(ctx, cfg, "", "get", "memcached", "found", "-n", ns, "-o", "wide")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(columns(out)).To(HaveKeyWithValue("DISCOVERY", m.Status.Discovery.Address))
			servesSlots(t, k, key(), 2)
			toldOfMembership(t, k, key())
			return ctx
		}).
		Assess("the client finds both slots, stores and reads", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g := NewWithT(t)
			c.Discovered(t, slotAddresses(ns, "found", 2), membershipWithin)
			set := c.Do(t, "set 500 first")
			g.Expect(nodeclient.Count(set, "errors")).To(BeZero(), "%v", set)
			g.Expect(nodeclient.Count(c.Do(t, "get 500 first"), "hits")).To(Equal(500))
			for k, items := range itemsPerSlot(t, kube(t, cfg), key(), 2) {
				g.Expect(items).To(BeNumerically(">", 100), "slot %d holds its share of the keys", k)
			}
			return ctx
		}).
		Assess("a replaced pod comes back in its slot: the other slot's keys stay where they are", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, k := NewWithT(t), kube(t, cfg)
			before := itemsPerSlot(t, k, key(), 2)
			old := &corev1.Pod{}
			g.Expect(k.Get(ctx, types.NamespacedName{Namespace: ns, Name: "found-1"}, old)).To(Succeed())
			g.Expect(k.Delete(ctx, old)).To(Succeed())
			g.Eventually(func(g Gomega) {
				p := &corev1.Pod{}
				g.Expect(k.Get(ctx, types.NamespacedName{Namespace: ns, Name: "found-1"}, p)).To(Succeed())
				g.Expect(p.UID).NotTo(Equal(old.UID))
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			converged(t, k, key(), 2)
			endpointsReady(t, k, key(), 2)
			servesSlots(t, k, key(), 2)
			// The client keys its ring on the slots' names: slot 0's keys
			// still read, slot 1's are gone with its pod, none moved.
			got := c.Do(t, "get 500 first")
			t.Logf("after found-1 was replaced: %v (slot 0 held %d)", got, before[0])
			g.Expect(nodeclient.Count(got, "hits")).To(Equal(before[0]), "slot 0's keys, all of them")
			g.Expect(nodeclient.Count(got, "wrong")).To(BeZero())
			set := c.Do(t, "set 200 second")
			g.Expect(nodeclient.Count(set, "errors")).To(BeZero(), "the new pod serves under the same name: %v", set)
			g.Expect(nodeclient.Count(c.Do(t, "get 200 second"), "hits")).To(Equal(200))
			return ctx
		}).
		Assess("a scale-up: the client follows the third slot without a restart", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, k := NewWithT(t), kube(t, cfg)
			m := &cachev1alpha1.Memcached{}
			g.Expect(k.Get(ctx, key(), m)).To(Succeed())
			g.Expect(k.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":3}}`)))).To(Succeed())
			converged(t, k, key(), 3)
			endpointsReady(t, k, key(), 3)
			c.Discovered(t, slotAddresses(ns, "found", 3), membershipWithin)
			toldOfMembership(t, k, key())
			set := c.Do(t, "set 500 third")
			g.Expect(nodeclient.Count(set, "errors")).To(BeZero(), "%v", set)
			g.Expect(nodeclient.Count(c.Do(t, "get 500 third"), "hits")).To(Equal(500))
			g.Expect(itemsPerSlot(t, k, key(), 3)[2]).To(BeNumerically(">", 50), "the new slot holds its share of the new keys")
			return ctx
		}).
		Assess("with the operator stopped and a pod deleted, the endpoint still answers with every slot", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if operator == nil {
				t.Skip("the operator runs in the cluster: this step stops it as a host process")
			}
			g, k := NewWithT(t), kube(t, cfg)
			m := &cachev1alpha1.Memcached{}
			g.Expect(k.Get(ctx, key(), m)).To(Succeed())
			want := slotAddresses(ns, "found", 3)
			// From a steady state: the endpoint's name resolves to the
			// three pods (the cluster's DNS caches an answer for 5 s) and
			// each serves the three slots.
			g.Eventually(func(g Gomega) {
				answers := askEveryAddress(t, dnsServer, m.Status.Discovery.Address)
				g.Expect(answers).To(HaveLen(3))
				for _, c := range answers {
					g.Expect(c.Nodes).To(HaveLen(3))
				}
			}).WithTimeout(membershipWithin).WithPolling(time.Second).Should(Succeed())
			operator.Kill()
			restarted := false
			restart := func() {
				if !restarted {
					restarted = true
					op, err := runOperator(cfg)
					NewWithT(t).Expect(err).NotTo(HaveOccurred())
					operator = op
				}
			}
			defer restart()
			old := &corev1.Pod{}
			g.Expect(k.Get(ctx, types.NamespacedName{Namespace: ns, Name: "found-0"}, old)).To(Succeed())
			g.Expect(k.Delete(ctx, old)).To(Succeed())
			// For 20 s from the deletion, as a client resolving the
			// endpoint's name and asking each address: some address
			// answers every time, and every answer lists the three slots.
			for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
				answers := askEveryAddress(t, dnsServer, m.Status.Discovery.Address)
				g.Expect(answers).NotTo(BeEmpty(), "no address of %s answered", m.Status.Discovery.Address)
				for _, c := range answers {
					var got []string
					for _, n := range c.Nodes {
						got = append(got, net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port))))
					}
					g.Expect(got).To(Equal(want))
				}
			}
			// Back, the operator publishes the new pod's address.
			restart()
			converged(t, k, key(), 3)
			servesSlots(t, k, key(), 3)
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// askEveryAddress resolves the endpoint's name with the cluster's DNS at
// dnsServer, as a pod does, and asks each of its addresses for the
// membership; it returns the answers of those that answered.
func askEveryAddress(t *testing.T, dnsServer, endpoint string) []discovery.Cluster {
	t.Helper()
	host, port, err := net.SplitHostPort(endpoint)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := clusterdns.Lookup(ctx, dnsServer, host)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var out []discovery.Cluster
	var failed []string
	for _, ip := range ips {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, port), 2*time.Second)
		if err != nil {
			failed = append(failed, err.Error())
			continue
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		c, err := discovery.Ask(conn)
		conn.Close()
		if err != nil {
			failed = append(failed, ip+": "+err.Error())
			continue
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		t.Logf("%s resolved to %v; none answered: %v", host, ips, failed)
	}
	return out
}

// slotAddresses are "host:port" of the first n slots of the Memcached
// name, sorted as the client keeps them.
func slotAddresses(ns, name string, n int) []string {
	var out []string
	for k := range n {
		out = append(out, net.JoinHostPort(desired.SlotHost(name, ns, k), strconv.Itoa(int(desired.DefaultContainerPort))))
	}
	slices.Sort(out)
	return out
}

// servesSlots waits until every pod's discovery endpoint answers with the
// first n slots, each with its pod's address.
func servesSlots(t *testing.T, k client.Client, key client.ObjectKey, n int) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		want := map[string]string{}
		for i := range n {
			p := &corev1.Pod{}
			g.Expect(k.Get(context.Background(), types.NamespacedName{Namespace: key.Namespace, Name: fmt.Sprintf("%s-%d", key.Name, i)}, p)).To(Succeed())
			g.Expect(p.Status.PodIP).NotTo(BeEmpty())
			want[desired.SlotHost(key.Name, key.Namespace, i)] = p.Status.PodIP
		}
		for _, ip := range want {
			c := askCluster(g, net.JoinHostPort(ip, strconv.Itoa(int(desired.DiscoveryPort))))
			got := map[string]string{}
			for _, node := range c.Nodes {
				got[node.Host] = node.IP
			}
			g.Expect(got).To(Equal(want), "the membership %s serves", ip)
		}
	}).WithTimeout(membershipWithin).WithPolling(time.Second).Should(Succeed())
}

// toldOfMembership checks that every running pod of key carries the
// version of the membership its ConfigMap holds
// (desired.AnnotationMembershipVersion), the operator's word to the
// kubelet to write it to the pod (told.Membership).
func toldOfMembership(t *testing.T, k client.Client, key client.ObjectKey) {
	t.Helper()
	m := &cachev1alpha1.Memcached{}
	NewWithT(t).Expect(k.Get(context.Background(), key, m)).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		ctx := context.Background()
		g.Expect(k.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: desired.MembershipName(key.Name)}, &corev1.ConfigMap{})).To(Succeed(), "the membership is published")
		pods := &corev1.PodList{}
		g.Expect(k.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabels{desired.LabelInstance: key.Name})).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		g.Expect(told.Membership(ctx, k, m)).To(Succeed())
	}).WithTimeout(membershipWithin).WithPolling(time.Second).Should(Succeed())
}

// askCluster asks the discovery endpoint at addr for the membership.
func askCluster(g Gomega, addr string) discovery.Cluster {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	g.Expect(conn.SetDeadline(time.Now().Add(5 * time.Second))).To(Succeed())
	c, err := discovery.Ask(conn)
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// itemsPerSlot is memcached's curr_items of each of the first n slots.
func itemsPerSlot(t *testing.T, k client.Client, key client.ObjectKey, n int) []int {
	t.Helper()
	g := NewWithT(t)
	out := make([]int, n)
	for i := range n {
		p := &corev1.Pod{}
		g.Expect(k.Get(context.Background(), types.NamespacedName{Namespace: key.Namespace, Name: fmt.Sprintf("%s-%d", key.Name, i)}, p)).To(Succeed())
		stats, err := session{}.run(net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(desired.DefaultContainerPort))), "stats")
		g.Expect(err).NotTo(HaveOccurred())
		for line := range strings.SplitSeq(stats, "\r\n") {
			if v, ok := strings.CutPrefix(line, "STAT curr_items "); ok {
				out[i], _ = strconv.Atoi(v)
			}
		}
	}
	return out
}

// realNodeIP is the real node's address, where the cluster's DNS (CoreDNS)
// listens.
func realNodeIP(t *testing.T, k client.Client) string {
	t.Helper()
	nodes := &corev1.NodeList{}
	NewWithT(t).Expect(k.List(context.Background(), nodes, client.MatchingLabels{realNodeLabel: "true"})).To(Succeed())
	NewWithT(t).Expect(nodes.Items).To(HaveLen(1))
	for _, a := range nodes.Items[0].Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	t.Fatal("the real node has no InternalIP")
	return ""
}
