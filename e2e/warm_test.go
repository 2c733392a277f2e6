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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/example/memcached-operator/pkg/desired"
)

// memcached's container restarted in its pod (here by a new image on the
// pod, as the kubelet does it: preStop, then SIGTERM) comes back with every
// item: the runner has memcached save on the way out, and the next one
// restores from the memory file on the pod's memory-backed volume. A
// memcached killed outright saves nothing, and comes back empty.
func TestAContainerRestartKeepsTheCache(t *testing.T) {
	var ns string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "warm"} }
	pod := func() types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: "warm-0"} }
	f := features.New("a restart of memcached's container keeps the cache").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("reaches the pods' addresses from this machine and kills a container through the real node's containerd: local cluster only")
			}
			ns = namespace(t, cfg, "warm")
			runningMemcached(t, cfg, key(), onRealNode(1))
			return ctx
		}).
		Assess("a new image on the pod restarts memcached with its items, in the same pod", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, k := NewWithT(t), kube(t, cfg)
			p := &corev1.Pod{}
			g.Expect(k.Get(ctx, pod(), p)).To(Succeed())
			addr := net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(desired.DefaultContainerPort)))
			var sets []string
			for i := range 1000 {
				sets = append(sets, fmt.Sprintf("set key-%d 0 0 %d", i, len(strconv.Itoa(i))), strconv.Itoa(i))
			}
			out, err := session{}.run(addr, sets...)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strings.Count(out, "STORED")).To(Equal(1000), out)
			fill(t, cfg, key(), 10<<20) // and 10 MiB in values of 512 KiB
			var before int
			g.Eventually(func() int {
				before = itemsPerSlot(t, k, key(), 1)[0]
				return before
			}).WithTimeout(20*time.Second).WithPolling(time.Second).Should(Equal(1020), "every value stored (fill's are in flight)")
			t.Logf("%d items before the restart", before)
			uid, restarts := p.UID, memcachedStatus(p).RestartCount

			_, next := memcachedImages()
			patch := fmt.Sprintf(`{"spec":{"containers":[{"name":%q,"image":%q}]}}`, desired.ContainerName, next)
			g.Expect(k.Patch(ctx, p, client.RawPatch(types.StrategicMergePatchType, []byte(patch)))).To(Succeed())
			start := time.Now()
			g.Eventually(func(g Gomega) {
				g.Expect(k.Get(ctx, pod(), p)).To(Succeed())
				s := memcachedStatus(p)
				g.Expect(s.RestartCount).To(Equal(restarts+1), "restarted once")
				g.Expect(s.Ready).To(BeTrue())
				g.Expect(s.Image).To(ContainSubstring(next))
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			t.Logf("memcached restarted with the new image in %s", time.Since(start).Round(time.Second))
			g.Expect(p.UID).To(Equal(uid), "the same pod")
			g.Expect(itemsPerSlot(t, k, key(), 1)[0]).To(Equal(before), "every item restored")
			got, err := session{}.run(addr, "get key-7 key-999")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal("VALUE key-7 0 1\r\n7\r\nVALUE key-999 0 3\r\n999\r\nEND\r\n"), "the same values")
			out, err = kubectl(ctx, cfg, "", "logs", "-n", ns, pod().Name, "-c", desired.ContainerName)
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("memcached restored its cache from the memory file"))
			return ctx
		}).
		Assess("a memcached killed saves nothing and comes back empty", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, k := NewWithT(t), kube(t, cfg)
			p := &corev1.Pod{}
			g.Expect(k.Get(ctx, pod(), p)).To(Succeed())
			restarts := memcachedStatus(p).RestartCount
			g.Expect(itemsPerSlot(t, k, key(), 1)[0]).To(BeNumerically(">", 0))
			// No one saves.
			killContainer(ctx, g, strings.TrimPrefix(memcachedStatus(p).ContainerID, "containerd://"))
			g.Eventually(func(g Gomega) {
				g.Expect(k.Get(ctx, pod(), p)).To(Succeed())
				s := memcachedStatus(p)
				g.Expect(s.RestartCount).To(Equal(restarts + 1))
				g.Expect(s.Ready).To(BeTrue())
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			g.Expect(itemsPerSlot(t, k, key(), 1)[0]).To(BeZero(), "nothing saved, nothing restored")
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// memcachedStatus is the status of p's memcached container.
func memcachedStatus(p *corev1.Pod) corev1.ContainerStatus {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == desired.ContainerName {
			return s
		}
	}
	return corev1.ContainerStatus{}
}
