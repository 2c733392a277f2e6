//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/nodeclient"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/ring"
)

// A new Memcached with spec.keyMoves whose second slot can never be
// scheduled (a required anti-affinity on a one-node cluster) keeps no
// client from its first: within 30 s of its creation the slot that serves
// is published, and a client with ElastiCache's auto discovery
// (memcached-elasticache) started with the Memcached finds it, stores and
// reads. Before, nothing was published for good, and every operation of
// the client failed.
func TestALateSlotKeepsNoClientFromTheOthers(t *testing.T) {
	t.Parallel()
	var ns string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "late"} }
	f := features.New("a late slot keeps no client from the others").WithLabel("needs", "containers").
		Assess("the slot that serves is published, and a client stores and reads", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("resolves the cluster's names with the real node's DNS from this machine: local cluster only")
			}
			g, k := NewWithT(t), kube(t, cfg)
			ns = namespace(t, cfg, "late")
			spec := onRealNode(2)
			spec.KeyMoves = &cachev1alpha1.KeyMovesSpec{Ring: string(ring.Node), ClientPollSeconds: ptr.To[int32](3)}
			spec.Affinity = &cachev1alpha1.Affinity{PodAntiAffinity: &cachev1alpha1.PodAffinity{Required: []cachev1alpha1.PodAffinityTerm{{
				LabelSelector: &cachev1alpha1.LabelSelector{MatchLabels: map[string]cachev1alpha1.LabelValue{desired.LabelMemcached: "late"}},
				TopologyKey:   corev1.LabelHostname,
			}}}}
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"}, Spec: spec}
			g.Expect(k.Create(ctx, m)).To(Succeed())
			created := time.Now()
			g.Eventually(func(g Gomega) {
				g.Expect(k.Get(ctx, key(), m)).To(Succeed())
				g.Expect(m.Status.Discovery).NotTo(BeNil())
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			c := nodeclient.Start(t, m.Status.Discovery.Address, nodeclient.Options{Interval: time.Second, DNSServer: realNodeIP(t, k)})
			c.Discovered(t, slotAddresses(ns, "late", 1), wholeMembershipWait+membershipWithin)
			t.Logf("the client found the first slot %s after the creation", time.Since(created).Round(time.Second))
			set := c.Do(t, "set 200 first")
			g.Expect(nodeclient.Count(set, "errors")).To(BeZero(), "%v", set)
			g.Expect(nodeclient.Count(c.Do(t, "get 200 first"), "hits")).To(Equal(200))

			late := &corev1.Pod{}
			g.Expect(k.Get(ctx, types.NamespacedName{Namespace: ns, Name: "late-1"}, late)).To(Succeed())
			g.Expect(late.Status.Phase).To(Equal(corev1.PodPending), "the second slot is still not scheduled")
			g.Expect(k.Get(ctx, key(), m)).To(Succeed())
			available := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionAvailable)
			g.Expect(available).NotTo(BeNil())
			g.Expect(available.Reason).NotTo(Equal(cachev1alpha1.ReasonMembershipUnpublished), "a membership is published")
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// wholeMembershipWait is the operator's: how long a new Memcached's first
// membership waits for its late slots.
const wholeMembershipWait = 30 * time.Second
