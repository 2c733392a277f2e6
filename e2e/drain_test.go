//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
)

// A node drain, as every cluster upgrade makes one: every pod of a
// Memcached with spec.keyMoves is evicted through the Eviction API, each
// asked for again while the disruption budget refuses it (as kubectl drain
// and the cluster autoscaler evict). Each hands its keys to the other
// slots in its preStop hooks before its memory goes, and its slot takes
// them back once its new pod serves; the budget lets the next pod go only
// then. A writer rewrites keys throughout, following the membership; as
// every slot is evicted, every key is an evicted slot's: at least 95% of
// them hold their last value afterwards, and none an older one.
func TestADrainHandsEachSlotsKeysOver(t *testing.T) {
	t.Parallel()
	s := newHandingOff("drained")
	key, rc, latest, endpoints := s.key, s.rc, s.latest, s.endpoints
	f := s.feature("a drain hands each slot's keys over").
		Assess("each evicted slot hands its keys over and takes them back", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g := NewWithT(t)
			w := startWriter(t, rc, endpoints(t, cfg), latest)
			start := time.Now()
			drain(t, cfg, key(), rc, endpoints(t, cfg))
			t.Logf("the three pods evicted, each handing its keys off and taking them back, in %s", time.Since(start).Round(time.Second))
			w.halt()
			t.Logf("the writer wrote %d values during the drain", w.writes)
			_, kept, missed, stale := readBack(t, rc, w, latest)
			t.Logf("after the drain: %d of %d keys kept, %d missed, %d stale", kept, movedKeys, missed, stale)
			g.Expect(stale).To(BeZero())
			g.Expect(float64(kept) / movedKeys).To(BeNumerically(">=", 0.95))
			g.Expect(eventsOf(g, t, cfg, key(), "KeyMoveIncomplete")).To(BeEmpty())
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// drain evicts every pod of the Memcached key as kubectl drain does: each
// pod not yet evicted is asked for again every 2 s while the disruption
// budget refuses it. It returns once every pod was evicted, the last
// one's slot whole again.
func drain(t *testing.T, cfg *envconf.Config, key client.ObjectKey, rc *ringClient, endpoints func() []string) {
	g, k := NewWithT(t), kube(t, cfg)
	uids := map[string]types.UID{}
	evicted := map[string]time.Time{}
	followed := map[types.UID]bool{}
	start := time.Now()
	g.Eventually(func(g Gomega) {
		followLogs(t, cfg, key, followed)
		for i := range 3 {
			name := fmt.Sprintf("%s-%d", key.Name, i)
			if _, ok := evicted[name]; ok {
				continue
			}
			p := &corev1.Pod{}
			g.Expect(k.Get(context.Background(), types.NamespacedName{Namespace: key.Namespace, Name: name}, p)).To(Succeed())
			eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: name},
				DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}}
			err := k.SubResource("eviction").Create(context.Background(), p, eviction)
			if apierrors.IsTooManyRequests(err) {
				continue
			}
			g.Expect(err).NotTo(HaveOccurred())
			uids[name], evicted[name] = p.UID, time.Now()
			t.Logf("%s evicted %s after the drain began", name, time.Since(start).Round(time.Second))
		}
		g.Expect(evicted).To(HaveLen(3), "the disruption budget refuses the rest yet")
	}).WithTimeout(3 * 3 * movesWithin).WithPolling(2 * time.Second).Should(Succeed())
	last := key.Name + "-0"
	for name, at := range evicted {
		if at.After(evicted[last]) {
			last = name
		}
	}
	wholeAgain(t, cfg, key, rc, endpoints, last, uids[last])
	followLogs(t, cfg, key, followed)
}

// followLogs keeps, for the story's failure, the discovery container's
// log of each pod of the Memcached key that has an address and is not in
// followed yet: the slots' successors too, whose word a hand-off's move
// waits for.
func followLogs(t *testing.T, cfg *envconf.Config, key client.ObjectKey, followed map[types.UID]bool) {
	pods := &corev1.PodList{}
	if err := kube(t, cfg).List(context.Background(), pods, client.InNamespace(key.Namespace), client.MatchingLabels{desired.LabelInstance: key.Name}); err != nil {
		return
	}
	for _, p := range pods.Items {
		if !followed[p.UID] && p.Status.PodIP != "" {
			followed[p.UID] = true
			keepLogOnFailure(t, cfg, key.Namespace, p.Name, desired.DiscoveryContainerName)
		}
	}
}

// wholeAgain waits until the pod name is another than uid, the membership
// lists every slot, that pod's address among them, with no move under way,
// and rc has it.
func wholeAgain(t *testing.T, cfg *envconf.Config, key client.ObjectKey, rc *ringClient, endpoints func() []string, name string, uid types.UID) {
	g, k := NewWithT(t), kube(t, cfg)
	g.Eventually(func(g Gomega) {
		p := &corev1.Pod{}
		g.Expect(k.Get(context.Background(), types.NamespacedName{Namespace: key.Namespace, Name: name}, p)).To(Succeed())
		g.Expect(p.UID).NotTo(Equal(uid), "the evicted pod is still there")
		g.Expect(p.Status.PodIP).NotTo(BeEmpty())
		cm := &corev1.ConfigMap{}
		g.Expect(k.Get(context.Background(), types.NamespacedName{Namespace: key.Namespace, Name: desired.MembershipName(key.Name)}, cm)).To(Succeed())
		g.Expect(cm.Data).NotTo(HaveKey(desired.MoveKey), "a move is under way")
		cl, err := discovery.Parse([]byte(cm.Data[desired.MembershipKey]))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cl.Nodes).To(HaveLen(3), "every slot is back")
		g.Expect(cl.Nodes).To(ContainElement(HaveField("IP", p.Status.PodIP)), "the new pod serves its slot")
		g.Expect(rc.follow(endpoints())).To(Succeed())
		g.Expect(rc.version).To(Equal(cl.Version), "the client has the membership")
	}).WithTimeout(3 * movesWithin).WithPolling(time.Second).Should(Succeed())
}
