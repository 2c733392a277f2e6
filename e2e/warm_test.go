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
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
)

// memcached's container restarted in its pod (here by a new image on the
// pod, as the kubelet does it: preStop, then SIGTERM) comes back with every
// item: the runner has memcached save on the way out, and the next one
// restores from the memory file on the pod's memory-backed volume. A
// memcached killed outright saves nothing, and comes back empty.
func TestAContainerRestartKeepsTheCache(t *testing.T) {
	t.Parallel()
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

// A new memcached image on the Memcached restarts memcached in its pods,
// in place, one slot at a time: the same pods (UIDs, addresses) keep every
// item, each pod says how many memcached restored, and no two slots are
// down at once. Pod labels and annotations change on the pods, with no
// restart. An image that cannot start stops the change at its first
// slot, the status names why, and the other slot keeps serving; rolling
// back mends that slot, which restores what it saved on the way out. A
// smaller memory limit restarts memcached in the same pods, empty: the
// status says so beforehand and an event per slot after.
func TestAnImageChangeRestartsMemcachedInPlaceAndKeepsTheCache(t *testing.T) {
	t.Parallel()
	var ns string
	var before []int
	uids := map[string]types.UID{}
	slots := []string{"inplace-0", "inplace-1"}
	// fill stores 500 items on slot 0 and 600 on slot 1, and notes their
	// pods' UIDs.
	fill := func(ctx context.Context, g Gomega, k client.Client) {
		for i, name := range slots {
			p := &corev1.Pod{}
			g.Expect(k.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)).To(Succeed())
			uids[name] = p.UID
			var sets []string
			for j := range 500 + 100*i {
				sets = append(sets, fmt.Sprintf("set key-%d-%d 0 0 %d", i, j, len(strconv.Itoa(j))), strconv.Itoa(j))
			}
			out, err := session{}.run(net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(desired.DefaultContainerPort))), sets...)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strings.Count(out, "STORED")).To(Equal(500+100*i), out)
		}
	}
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "inplace"} }
	first, next := memcachedImages()
	const broken = "localhost/memcached:does-not-exist"
	// restartCounts are the restart counts of memcached's container in
	// the slots, whose pods are those of the start.
	restartCounts := func(ctx context.Context, g *WithT, k client.Client) map[string]int32 {
		restarts := map[string]int32{}
		for _, name := range slots {
			p := &corev1.Pod{}
			g.Expect(k.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)).To(Succeed())
			g.Expect(p.UID).To(Equal(uids[name]), "the same pod")
			restarts[name] = memcachedStatus(p).RestartCount
		}
		return restarts
	}
	// settingsTaken checks that no slot's memcached restarts in place any
	// more and that each one's stats settings match every pattern.
	settingsTaken := func(ctx context.Context, g Gomega, k client.Client, patterns ...string) {
		for _, name := range slots {
			p := &corev1.Pod{}
			g.Expect(k.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)).To(Succeed())
			g.Expect(p.Annotations).NotTo(HaveKey(desired.AnnotationRestartingFrom))
			out, err := session{}.run(net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(desired.DefaultContainerPort))), "stats settings")
			g.Expect(err).NotTo(HaveOccurred())
			for _, pattern := range patterns {
				g.Expect(out).To(MatchRegexp(pattern), name)
			}
		}
	}
	f := features.New("an image change keeps the cache").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("reaches the pods' addresses from this machine: local cluster only")
			}
			ns = namespace(t, cfg, "inplace")
			runningMemcached(t, cfg, key(), onRealNode(2))
			g, k := NewWithT(t), kube(t, cfg)
			fill(ctx, g, k)
			before = itemsPerSlot(t, k, key(), 2)
			g.Expect(before).To(Equal([]int{500, 600}))
			return ctx
		}).
		Assess("a new image restarts memcached in place, one slot at a time, with every item", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, k := NewWithT(t), kube(t, cfg)
			g.Expect(first).NotTo(Equal(next))
			setImage(t, cfg, key(), next)
			mostDown := 0
			g.Eventually(func(g Gomega) {
				down := 0
				for _, name := range slots {
					p := &corev1.Pod{}
					g.Expect(k.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)).To(Succeed())
					if !memcachedStatus(p).Ready {
						down++
					}
				}
				mostDown = max(mostDown, down)
				for i, name := range slots {
					p := &corev1.Pod{}
					g.Expect(k.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)).To(Succeed())
					g.Expect(p.UID).To(Equal(uids[name]), "the same pod")
					g.Expect(memcachedStatus(p).Image).To(ContainSubstring(next))
					g.Expect(p.Annotations).To(HaveKeyWithValue(desired.AnnotationWarmRestart,
						fmt.Sprintf("memcached restored %d items from its memory file", before[i])))
				}
			}).WithTimeout(2 * timeout).WithPolling(poll).Should(Succeed())
			converged(t, k, key(), 2)
			g.Expect(mostDown).To(BeNumerically("<=", 1), "one slot at a time")
			// The last slot first, and the next asked to stop only once
			// it ran again: stopped at least its preStop's sleep later
			// (the kubelet's times are in seconds).
			var pods [2]corev1.Pod
			for i, name := range slots {
				g.Expect(k.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pods[i])).To(Succeed())
			}
			started := memcachedStatus(&pods[1]).State.Running.StartedAt
			stopped := memcachedStatus(&pods[0]).LastTerminationState.Terminated.FinishedAt
			t.Logf("slot 1's memcached ran again at %s, slot 0's stopped at %s", started, stopped)
			var preStop time.Duration
			for _, c := range pods[0].Spec.Containers {
				if c.Name == desired.ContainerName {
					preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
				}
			}
			g.Expect(preStop).To(BeNumerically(">", time.Second))
			g.Expect(stopped.Sub(started.Time)).To(BeNumerically(">=", preStop-time.Second), "slot 0 asked to stop only once slot 1 ran again")
			g.Expect(itemsPerSlot(t, k, key(), 2)).To(Equal(before), "every item kept")
			g.Eventually(func(g Gomega) {
				g.Expect(eventsOf(g, t, cfg, key(), "RestartedWarm")).To(HaveLen(2))
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			g.Expect(eventsOf(g, t, cfg, key(), "RestartedEmpty")).To(BeEmpty())
			g.Expect(eventsOf(g, t, cfg, key(), "ReplacingPod")).To(BeEmpty())
			return ctx
		}).
		Assess("pod labels and annotations change on the pods, with no restart", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, k := NewWithT(t), kube(t, cfg)
			restarts := restartCounts(ctx, g, k)
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key().Name}}
			onPods := func(patch string, check func(g Gomega, p *corev1.Pod)) {
				g.Expect(k.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
				g.Eventually(func(g Gomega) {
					for _, name := range slots {
						p := &corev1.Pod{}
						g.Expect(k.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)).To(Succeed())
						check(g, p)
					}
				}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
				converged(t, k, key(), 2)
			}
			onPods(`{"spec":{"podLabels":{"team":"a","tier":"cache"},"podAnnotations":{"example.com/owner":"b"}}}`, func(g Gomega, p *corev1.Pod) {
				g.Expect(p.Labels).To(HaveKeyWithValue("team", "a"))
				g.Expect(p.Labels).To(HaveKeyWithValue("tier", "cache"))
				g.Expect(p.Annotations).To(HaveKeyWithValue("example.com/owner", "b"))
			})
			onPods(`{"spec":{"podLabels":{"team":"c","tier":null}}}`, func(g Gomega, p *corev1.Pod) {
				g.Expect(p.Labels).To(HaveKeyWithValue("team", "c"))
				g.Expect(p.Labels).NotTo(HaveKey("tier"), "a pod label removed from the spec")
				g.Expect(p.Annotations).To(HaveKeyWithValue("example.com/owner", "b"))
			})
			g.Expect(restartCounts(ctx, g, k)).To(Equal(restarts), "no restart")
			g.Expect(itemsPerSlot(t, k, key(), 2)).To(Equal(before))
			g.Expect(eventsOf(g, t, cfg, key(), "ReplacingPod")).To(BeEmpty())
			return ctx
		}).
		Assess("threads and connections change in place: memcached restarts warm in its container", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, k := NewWithT(t), kube(t, cfg)
			restarts := restartCounts(ctx, g, k)
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key().Name}}
			g.Expect(k.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"threads":2,"maxConnections":500}}`)))).To(Succeed())
			g.Eventually(func(g Gomega) {
				settingsTaken(ctx, g, k, `(?m)^STAT num_threads 2\r?$`, `(?m)^STAT maxconns 500\r?$`)
			}).WithTimeout(2 * timeout).WithPolling(poll).Should(Succeed())
			converged(t, k, key(), 2)
			g.Expect(restartCounts(ctx, g, k)).To(Equal(restarts), "the same container: memcached restarted in it")
			g.Expect(itemsPerSlot(t, k, key(), 2)).To(Equal(before), "every item kept")
			var confirmed []string
			for _, e := range eventsOf(g, t, cfg, key(), "RestartedWarm") {
				if strings.Contains(e.Note, "with settings --conn-limit=500 --threads=2") {
					confirmed = append(confirmed, e.Note)
				}
			}
			g.Expect(confirmed).To(HaveLen(2), "one confirmed restart per slot")
			g.Expect(eventsOf(g, t, cfg, key(), "RestartedEmpty")).To(BeEmpty())
			g.Expect(eventsOf(g, t, cfg, key(), "ReplacingPod")).To(BeEmpty())
			return ctx
		}).
		Assess("resources change in place: the pods are resized, nothing restarts", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, k := NewWithT(t), kube(t, cfg)
			restarts := restartCounts(ctx, g, k)
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key().Name}}
			g.Expect(k.Patch(ctx, m, client.RawPatch(types.MergePatchType,
				[]byte(`{"spec":{"resources":{"requests":{"cpu":"50m","memory":"96Mi"}}}}`)))).To(Succeed())
			// Requests only: a kubelet on cgroup v1 (the real node's; seen
			// on v1.34.4) may refuse a memory limit where there was none
			// ("cannot decrease memory limits: missing container memory
			// usage"), and the operator then replaces the pod.
			want := corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("96Mi")},
			}
			if !servesPodResize(t, cfg) {
				// Before 1.33 the apiserver has no pods/resize: the operator
				// replaces each pod, which starts empty, and says why.
				g.Eventually(func(g Gomega) {
					for _, name := range slots {
						p := &corev1.Pod{}
						g.Expect(k.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)).To(Succeed())
						g.Expect(p.UID).NotTo(Equal(uids[name]), "%s replaced", name)
						for _, c := range p.Spec.Containers {
							if c.Name == desired.ContainerName {
								g.Expect(c.Resources.Requests.Cpu().Cmp(want.Requests[corev1.ResourceCPU])).To(BeZero(), name)
								g.Expect(c.Resources.Requests.Memory().Cmp(want.Requests[corev1.ResourceMemory])).To(BeZero(), name)
							}
						}
					}
				}).WithTimeout(2 * timeout).WithPolling(poll).Should(Succeed())
				converged(t, k, key(), 2)
				replaced := eventsOf(g, t, cfg, key(), "ReplacingPod")
				g.Expect(replaced).To(HaveLen(2))
				for _, e := range replaced {
					g.Expect(e.Note).To(ContainSubstring("cannot resize it in place"))
				}
				g.Expect(eventsOf(g, t, cfg, key(), "ResizingInPlace")).To(BeEmpty())
				// The steps after this one start from a full cache again.
				fill(ctx, g, k)
				g.Expect(itemsPerSlot(t, k, key(), 2)).To(Equal(before))
				return ctx
			}
			g.Eventually(func(g Gomega) {
				for _, name := range slots {
					p := &corev1.Pod{}
					g.Expect(k.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)).To(Succeed())
					s := memcachedStatus(p)
					g.Expect(s.Resources).NotTo(BeNil(), "the kubelet says which resources memcached runs with")
					for _, l := range [][2]corev1.ResourceList{{s.Resources.Requests, want.Requests}, {s.Resources.Limits, want.Limits}} {
						for r, q := range l[1] {
							have, ok := l[0][r]
							g.Expect(ok).To(BeTrue(), "%s: %s", name, r)
							g.Expect(have.Cmp(q)).To(BeZero(), "%s: %s", name, r)
						}
					}
					for _, c := range p.Status.Conditions {
						g.Expect(c.Type).NotTo(BeElementOf(corev1.PodResizePending, corev1.PodResizeInProgress), c.Message)
					}
				}
			}).WithTimeout(2 * timeout).WithPolling(poll).Should(Succeed())
			converged(t, k, key(), 2)
			g.Expect(restartCounts(ctx, g, k)).To(Equal(restarts), "the same containers")
			g.Expect(itemsPerSlot(t, k, key(), 2)).To(Equal(before), "every item kept")
			g.Expect(eventsOf(g, t, cfg, key(), "ResizingInPlace")).To(HaveLen(2))
			g.Expect(eventsOf(g, t, cfg, key(), "ReplacingPod")).To(BeEmpty())
			return ctx
		}).
		Assess("an image that cannot start stops at the first slot; rolling back restores it", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, k := NewWithT(t), kube(t, cfg)
			setImage(t, cfg, key(), broken)
			last := types.NamespacedName{Namespace: ns, Name: slots[1]}
			g.Eventually(func(g Gomega) {
				m := &cachev1alpha1.Memcached{}
				g.Expect(k.Get(ctx, key(), m)).To(Succeed())
				c := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionProgressing)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonImagePullFailed), c.Message)
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			// The first slot waits, and serves what it held.
			g.Consistently(func(g Gomega) {
				p := &corev1.Pod{}
				g.Expect(k.Get(ctx, types.NamespacedName{Namespace: ns, Name: slots[0]}, p)).To(Succeed())
				s := memcachedStatus(p)
				g.Expect(s.Ready).To(BeTrue())
				g.Expect(s.Image).To(ContainSubstring(next))
			}).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
			g.Expect(itemsPerSlot(t, k, key(), 1)).To(Equal(before[:1]))

			setImage(t, cfg, key(), next)
			converged(t, k, key(), 2)
			p := &corev1.Pod{}
			g.Expect(k.Get(ctx, last, p)).To(Succeed())
			g.Expect(p.UID).To(Equal(uids[slots[1]]), "the same pod")
			g.Expect(p.Annotations).To(HaveKeyWithValue(desired.AnnotationWarmRestart,
				fmt.Sprintf("memcached restored %d items from its memory file", before[1])), "saved on the way to the broken image")
			g.Expect(itemsPerSlot(t, k, key(), 2)).To(Equal(before))
			return ctx
		}).
		Assess("a smaller memory limit restarts memcached in place, empty, as the status says beforehand", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, k := NewWithT(t), kube(t, cfg)
			restarts := restartCounts(ctx, g, k)
			// Those of the resize step where the cluster has no resize.
			replaced := len(eventsOf(g, t, cfg, key(), "ReplacingPod"))
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key().Name}}
			g.Expect(k.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"memoryLimitMiB":48}}`)))).To(Succeed())
			said := false
			g.Eventually(func(g Gomega) {
				m := &cachev1alpha1.Memcached{}
				g.Expect(k.Get(ctx, key(), m)).To(Succeed())
				if c := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionProgressing); c != nil &&
					strings.Contains(c.Message, "with memcached restarting empty: its memory limit changes") {
					said = true
				}
				settingsTaken(ctx, g, k, `(?m)^STAT maxbytes 50331648\r?$`)
			}).WithTimeout(2 * timeout).WithPolling(poll).Should(Succeed())
			converged(t, k, key(), 2)
			g.Expect(said).To(BeTrue(), "Progressing named the pods restarting empty")
			g.Expect(restartCounts(ctx, g, k)).To(Equal(restarts), "the same pods and containers: memcached restarted in them")
			g.Expect(itemsPerSlot(t, k, key(), 2)).To(Equal([]int{0, 0}), "memcached keeps no item across a new memory limit")
			var told []string
			for _, e := range eventsOf(g, t, cfg, key(), "RestartedEmpty") {
				if strings.Contains(e.Note, "with settings --memory-limit=48") && strings.Contains(e.Note, "its cache is empty") {
					told = append(told, e.Note)
				}
			}
			g.Expect(told).To(HaveLen(2), "one event per slot")
			g.Expect(eventsOf(g, t, cfg, key(), "ReplacingPod")).To(HaveLen(replaced), "no pod replaced")
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// setImage sets spec.image of the Memcached key.
func setImage(t *testing.T, cfg *envconf.Config, key client.ObjectKey, image string) {
	t.Helper()
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	patch := fmt.Sprintf(`{"spec":{"image":%q}}`, image)
	NewWithT(t).Expect(kube(t, cfg).Patch(context.Background(), m, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

// servesPodResize tells whether the cluster's apiserver serves pods/resize
// (Kubernetes 1.33 and later): where it does not, the operator replaces a
// pod whose resources change.
func servesPodResize(t *testing.T, cfg *envconf.Config) bool {
	t.Helper()
	g := NewWithT(t)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg.Client().RESTConfig())
	g.Expect(err).NotTo(HaveOccurred())
	list, err := dc.ServerResourcesForGroupVersion("v1")
	g.Expect(err).NotTo(HaveOccurred())
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "pods/resize" })
}
