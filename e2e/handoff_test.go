//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
)

// A new memory limit, which memcached keeps no item across, with
// spec.keyMoves: each pod hands its keys to the other slots before
// memcached restarts empty in it, and takes them back once it serves. A
// writer rewrites keys throughout, following the membership; afterwards
// at least 95% of the keys hold their last value and none an older one,
// every slot restarted empty (its event says its keys come back), and the
// status never said that caches would be lost.
func TestAMemoryLimitChangeHandsTheKeysOver(t *testing.T) {
	t.Parallel()
	s := newHandingOff("handing")
	key, rc, latest, endpoints := s.key, s.rc, s.latest, s.endpoints
	f := s.feature("a memory limit change hands the keys over").
		Assess("each slot hands its keys over, restarts empty, and takes them back", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, k := NewWithT(t), kube(t, cfg)
			statuses := startWatch(t, k, key())
			w := startWriter(t, rc, endpoints(t, cfg), latest)
			m := &cachev1alpha1.Memcached{}
			g.Expect(k.Get(ctx, key(), m)).To(Succeed())
			g.Expect(k.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"memoryLimitMiB":48}}`)))).To(Succeed())
			g.Eventually(func(g Gomega) {
				for i := range 3 {
					p := &corev1.Pod{}
					g.Expect(k.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: fmt.Sprintf("%s-%d", s.name, i)}, p)).To(Succeed())
					g.Expect(p.Annotations).NotTo(HaveKey(desired.AnnotationRestartingFrom))
					out, err := session{}.run(net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(desired.DefaultContainerPort))), "stats settings")
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(out).To(MatchRegexp(`(?m)^STAT maxbytes 50331648\r?$`), p.Name)
				}
				cm := &corev1.ConfigMap{}
				g.Expect(k.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: desired.MembershipName(s.name)}, cm)).To(Succeed())
				g.Expect(cm.Data).NotTo(HaveKey(desired.MoveKey), "a move is under way")
				cl, err := discovery.Parse([]byte(cm.Data[desired.MembershipKey]))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(cl.Nodes).To(HaveLen(3), "every slot is back")
				g.Expect(rc.follow(endpoints(t, cfg)())).To(Succeed())
				g.Expect(rc.version).To(Equal(cl.Version), "the client has the membership")
			}).WithTimeout(3 * movesWithin).WithPolling(time.Second).Should(Succeed())
			w.halt()
			t.Logf("the writer wrote %d values during the hand-offs", w.writes)
			_, kept, missed, stale := readBack(t, rc, w, latest)
			t.Logf("after the new memory limit: %d of %d keys kept, %d missed, %d stale", kept, movedKeys, missed, stale)
			g.Expect(stale).To(BeZero())
			g.Expect(float64(kept) / movedKeys).To(BeNumerically(">=", 0.95))
			var restarted []string
			for _, e := range eventsOf(g, t, cfg, key(), "RestartedEmpty") {
				if e.Related != nil && strings.Contains(e.Note, "come back") {
					restarted = append(restarted, e.Related.Name)
				}
			}
			g.Expect(restarted).To(ConsistOf(s.name+"-0", s.name+"-1", s.name+"-2"), "each slot restarted empty after its hand-off")
			g.Expect(eventsOf(g, t, cfg, key(), "KeyMoveIncomplete")).To(BeEmpty())
			for _, s := range statuses.stop() {
				if c := meta.FindStatusCondition(s.Status.Conditions, cachev1alpha1.ConditionProgressing); c != nil {
					g.Expect(c.Message).NotTo(ContainSubstring("restarting empty: "), "the status said caches would be lost")
				}
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// handingOff is a story of a Memcached of keyMovingMemcached whose slots
// hand their keys off: its name, its namespace once made, a client of its
// membership and the last value of each key.
type handingOff struct {
	name, ns string
	rc       *ringClient
	latest   map[string]string
}

func newHandingOff(name string) *handingOff {
	return &handingOff{name: name, rc: &ringClient{}, latest: map[string]string{}}
}

func (s *handingOff) key() client.ObjectKey { return client.ObjectKey{Namespace: s.ns, Name: s.name} }

// endpoints are the discovery endpoints of its pods, looked up anew at
// each call.
func (s *handingOff) endpoints(t *testing.T, cfg *envconf.Config) func() []string {
	return func() []string { return discoveryEndpoints(t, cfg, s.key()) }
}

// feature is the story title, set up with the Memcached made and its keys
// stored.
func (s *handingOff) feature(title string) *features.FeatureBuilder {
	return features.New(title).WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("reaches the pods' addresses from this machine: local cluster only")
			}
			s.ns = namespace(t, cfg, s.name)
			keyMovingMemcached(t, cfg, s.key(), s.rc, s.latest, s.endpoints(t, cfg))
			return ctx
		})
}
