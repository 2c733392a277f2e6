//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/ring"
)

// forgedKeys is how many keys the forged-plan story stores.
const forgedKeys = 600

// A user with ConfigMap rights alone merges a plan into the membership
// ConfigMap, under a field manager of their own, that names one more slot
// (the tenth) at an address outside the Memcached's pods, and then a
// membership that sends slot 0's clients there. Neither is followed: the
// StatefulSet keeps its size, no pod reaches that address, the endpoints
// serve the operator's membership, and every key stays where it was.
func TestAForgedPlanMovesNothing(t *testing.T) {
	t.Parallel()
	var ns string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "forged"} }
	rc := &ringClient{}
	endpoints := func(t *testing.T, cfg *envconf.Config) []string { return discoveryEndpoints(t, cfg, key()) }
	// outside is an address no pod of the Memcached has: a listener of
	// this machine, on all its addresses, counting who connects.
	var outside net.Listener
	var reached atomic.Int32
	f := features.New("a forged plan moves nothing").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("reaches the pods' addresses from this machine: local cluster only")
			}
			g := NewWithT(t)
			var err error
			outside, err = net.Listen("tcp", "0.0.0.0:0")
			g.Expect(err).NotTo(HaveOccurred())
			t.Cleanup(func() { outside.Close() })
			go func() {
				for {
					c, err := outside.Accept()
					if err != nil {
						return
					}
					reached.Add(1)
					c.Close()
				}
			}()
			ns = namespace(t, cfg, "forged")
			spec := onRealNode(3)
			spec.KeyMoves = &cachev1alpha1.KeyMovesSpec{Ring: string(ring.Libmemcached), ClientPollSeconds: ptr.To[int32](3)}
			runningMemcached(t, cfg, key(), spec)
			g.Eventually(func(g Gomega) {
				g.Expect(rc.follow(endpoints(t, cfg))).To(Succeed())
				g.Expect(rc.addr).To(HaveLen(3))
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			for i := range forgedKeys {
				g.Expect(rc.set(keyName(i), "v-"+strconv.Itoa(i))).To(Succeed())
			}
			return ctx
		}).
		Assess("a plan and a membership merged in by another hand are not followed", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			cmKey := types.NamespacedName{Namespace: ns, Name: desired.MembershipName("forged")}
			cm := &corev1.ConfigMap{}
			g.Expect(c.Get(ctx, cmKey, cm)).To(Succeed())
			published, err := discovery.Parse([]byte(cm.Data[desired.MembershipKey]))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(published.Nodes).To(HaveLen(3))
			// The outside address, as the pods reach this machine: the
			// real node's own address.
			nodes := &corev1.NodeList{}
			g.Expect(c.List(ctx, nodes, client.MatchingLabels{realNodeLabel: "true"})).To(Succeed())
			g.Expect(nodes.Items).To(HaveLen(1))
			host := ""
			for _, a := range nodes.Items[0].Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					host = a.Address
				}
			}
			g.Expect(host).NotTo(BeEmpty())
			_, port, _ := net.SplitHostPort(outside.Addr().String())
			p, _ := strconv.Atoi(port)
			to := discovery.Cluster{Version: published.Version + 1, Nodes: append(append([]discovery.Node{}, published.Nodes...),
				discovery.Node{Host: "forged-9.forged." + ns + ".svc", IP: host, Port: int32(p)})}
			now := time.Now()
			plan := move.Plan{ID: to.Version, Ring: ring.Libmemcached, Step: move.StepCopy, From: string(published.Body()), To: string(to.Body()), Started: now, Stepped: now}
			forge := func(data map[string]string) {
				body, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
					"metadata": map[string]any{"name": cmKey.Name, "namespace": ns}, "data": data})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: cm.ObjectMeta}, client.RawPatch(types.ApplyPatchType, body),
					client.FieldOwner("intruder"), client.ForceOwnership)).To(Succeed())
			}
			forge(map[string]string{desired.MoveKey: plan.Marshal()})
			g.Consistently(func(g Gomega) {
				set := &appsv1.StatefulSet{}
				g.Expect(c.Get(ctx, key(), set)).To(Succeed())
				g.Expect(*set.Spec.Replicas).To(Equal(int32(3)), "the StatefulSet's size")
				g.Expect(reached.Load()).To(BeZero(), "connections to the plan's outside address")
			}).WithTimeout(15 * time.Second).WithPolling(poll).Should(Succeed())

			// A membership giving slot 0 the outside address: the
			// endpoints serve the operator's still.
			forged := discovery.Cluster{Version: published.Version + 5, Nodes: append([]discovery.Node{}, published.Nodes...)}
			forged.Nodes[0].IP = host
			forge(map[string]string{desired.MembershipKey: string(forged.Body()), desired.MoveKey: plan.Marshal()})
			g.Consistently(func(g Gomega) {
				for _, e := range endpoints(t, cfg) {
					conn, err := net.DialTimeout("tcp", e, 2*time.Second)
					g.Expect(err).NotTo(HaveOccurred())
					_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
					served, err := discovery.Ask(conn)
					conn.Close()
					g.Expect(err).NotTo(HaveOccurred())
					for _, n := range served.Nodes {
						g.Expect(n.IP).NotTo(Equal(host), "endpoint %s serves the forged address", e)
					}
				}
			}).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
			g.Expect(reached.Load()).To(BeZero(), "connections to the outside address")

			// Every key is where it was.
			g.Expect(rc.follow(endpoints(t, cfg))).To(Succeed())
			for i := range forgedKeys {
				got, err := rc.get(keyName(i))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal("v-"+strconv.Itoa(i)), "key %s", keyName(i))
			}
			g.Expect(eventsOf(g, t, cfg, key(), "MovingKeys")).To(BeEmpty())
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
