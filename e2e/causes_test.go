//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
)

// Why is my cache not ready: each cause is provoked for real on the real
// node, is named in the Memcached's conditions (reason and message, as
// Kubernetes reports it) within seconds, is told in one event, and clears
// once fixed.
func TestCausesAreNamed(t *testing.T) {
	var ns string
	f := features.New("why a cache is not ready").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("writes to the pods' addresses from this machine: local cluster only")
			}
			ns = namespace(t, cfg, "causes")
			return ctx
		}).
		Assess("an image that does not exist", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			key := client.ObjectKey{Namespace: ns, Name: "no-image"}
			spec := onRealNode(2)
			spec.Image = "localhost/memcached:does-not-exist"
			create(t, cfg, key, spec)
			// The pods fail one by one: the count says so as it grows.
			cause(t, cfg, key, cachev1alpha1.ReasonImagePullFailed, true, "2 of 2 pods", "localhost/memcached:does-not-exist")
			fix(t, cfg, key, `{"spec":{"image":"`+localMemcachedImage+`"}}`, 2)
			return ctx
		}).
		Assess("memcached exits at start", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			// A port below 1024: memcached runs as a user that may not
			// listen there, and says so before it exits.
			key := client.ObjectKey{Namespace: ns, Name: "low-port"}
			spec := onRealNode(1)
			spec.ContainerPort = ptr.To[int32](80)
			create(t, cfg, key, spec)
			cause(t, cfg, key, cachev1alpha1.ReasonContainerCrashing, true,
				"Container memcached of 1 of 1 pods exits at start", "exit code 71", "failed to listen on TCP port 80")
			fix(t, cfg, key, `{"spec":{"containerPort":11211}}`, 1)
			return ctx
		}).
		Assess("an image without memcached", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			// An image that exists but is not memcached's: the warm runner
			// (cmd/warm) cannot start memcached, whatever the restarts.
			key := client.ObjectKey{Namespace: ns, Name: "not-memcached"}
			spec := onRealNode(1)
			spec.Image = localClientImage
			create(t, cfg, key, spec)
			cause(t, cfg, key, cachev1alpha1.ReasonContainerConfigInvalid, true,
				"1 of 1 pods cannot start container memcached (Error, exit code 127", `exec: "memcached"`, "check that spec.image")
			fix(t, cfg, key, `{"spec":{"image":"`+localMemcachedImage+`"}}`, 1)
			return ctx
		}).
		Assess("memcached killed for its memory", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			// memcached may hold 64 MiB of items in a container allowed
			// 24 MiB: storing 40 MiB gets it OOM-killed.
			g, k := NewWithT(t), kube(t, cfg)
			key := client.ObjectKey{Namespace: ns, Name: "small"}
			spec := onRealNode(1)
			spec.MemoryLimitMiB = ptr.To[int32](64)
			spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("24Mi")}}
			runningMemcached(t, cfg, key, spec)
			seen := startWatch(t, k, key)
			fill(t, cfg, key, 40<<20)
			var said *metav1.Condition
			g.Eventually(func() *metav1.Condition {
				said = availableWith(seen, cachev1alpha1.ReasonOOMKilled)
				return said
			}).WithTimeout(timeout).WithPolling(poll).ShouldNot(BeNil(), "a status naming the OOM kill")
			t.Logf("reported: %s: %s", said.Reason, said.Message)
			g.Expect(said.Message).To(ContainSubstring("memoryLimitMiB (64) is not below resources.limits.memory (24Mi)"))
			events(t, cfg, key, cachev1alpha1.ReasonOOMKilled)
			fix(t, cfg, key, `{"spec":{"memoryLimitMiB":8}}`, 1)
			fill(t, cfg, key, 40<<20) // memcached now evicts instead
			g.Consistently(func(g Gomega) {
				pods := &corev1.PodList{}
				g.Expect(k.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": key.Name})).To(Succeed())
				for _, p := range pods.Items {
					if p.DeletionTimestamp == nil {
						i := slices.IndexFunc(p.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.Name == desired.ContainerName })
						g.Expect(i).To(BeNumerically(">=", 0), "pod %s's memcached container status", p.Name)
						g.Expect(p.Status.ContainerStatuses[i].RestartCount).To(BeZero(), "pod %s's memcached restarted", p.Name)
					}
				}
			}).WithTimeout(5 * time.Second).WithPolling(poll).Should(Succeed())
			converged(t, k, key, 1)
			return ctx
		}).
		Assess("pods the scheduler cannot place", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			key := client.ObjectKey{Namespace: ns, Name: "too-big"}
			spec := onRealNode(1)
			spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}}
			create(t, cfg, key, spec)
			cause(t, cfg, key, cachev1alpha1.ReasonPodsUnschedulable, false, "1 of 1 pods cannot be scheduled", "Insufficient cpu")
			fix(t, cfg, key, `{"spec":{"resources":null}}`, 1)
			return ctx
		}).
		Assess("a ResourceQuota that refuses the pods", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, k := NewWithT(t), kube(t, cfg)
			quotaNS := namespace(t, cfg, "quota")
			quota := &corev1.ResourceQuota{
				ObjectMeta: metav1.ObjectMeta{Namespace: quotaNS, Name: "no-pods"},
				Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
			}
			g.Expect(k.Create(ctx, quota)).To(Succeed())
			key := client.ObjectKey{Namespace: quotaNS, Name: "quota"}
			create(t, cfg, key, onRealNode(1))
			cause(t, cfg, key, cachev1alpha1.ReasonPodsForbidden, true, "Pods of StatefulSet quota cannot be created", "exceeded quota: no-pods")
			g.Expect(k.Delete(ctx, quota)).To(Succeed())
			// The StatefulSet controller retries with a back-off: up to
			// minutes, so the fix is waited for twice as long.
			g.Eventually(func(g Gomega) {
				m := &cachev1alpha1.Memcached{}
				g.Expect(k.Get(ctx, key, m)).To(Succeed())
				g.Expect(meta.IsStatusConditionTrue(m.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue())
				g.Expect(meta.IsStatusConditionFalse(m.Status.Conditions, cachev1alpha1.ConditionStalled)).To(BeTrue())
			}).WithTimeout(2 * timeout).WithPolling(poll).Should(Succeed())
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// create creates the Memcached key with spec.
func create(t *testing.T, cfg *envconf.Config, key client.ObjectKey, spec cachev1alpha1.MemcachedSpec) {
	t.Helper()
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Spec: spec}
	NewWithT(t).Expect(kube(t, cfg).Create(context.Background(), m)).To(Succeed())
}

// cause waits until the Memcached key's conditions name reason with a
// message that says each of says: Available False with it, and Stalled True
// with it when stalled, else Progressing True with it; kstatus reads Failed
// or InProgress to match. It checks that this came within seconds of
// Kubernetes saying it, and that one event told it.
func cause(t *testing.T, cfg *envconf.Config, key client.ObjectKey, reason string, stalled bool, says ...string) {
	t.Helper()
	g, k := NewWithT(t), kube(t, cfg)
	m := &cachev1alpha1.Memcached{}
	// Two moments are timed, each from when Kubernetes said it (in the
	// pods, or the Deployment) to when the status did, as seen by polling
	// both: the reason named at all (Kubernetes reporting it for one pod),
	// and the whole message (for every pod it counts: the kubelet pulls
	// images one at a time, so the pods of a size 2 can fail seconds
	// apart).
	var firstSaid, allSaid, firstNamed time.Time
	g.Eventually(func(g Gomega) {
		now := time.Now()
		n, of := kubernetesSays(t, k, key, reason)
		if firstSaid.IsZero() && n > 0 {
			firstSaid = now
		}
		if allSaid.IsZero() && n > 0 && n == of {
			allSaid = now
		}
		g.Expect(k.Get(context.Background(), key, m)).To(Succeed())
		av := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionAvailable)
		g.Expect(av).NotTo(BeNil())
		g.Expect(av.Reason).To(Equal(reason), av.Message)
		if firstNamed.IsZero() {
			firstNamed = now
		}
		for _, s := range says {
			g.Expect(av.Message).To(ContainSubstring(s))
		}
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	allNamed := time.Now()
	// Kubernetes' own report must have been seen: a list that failed
	// throughout would otherwise time nothing, and pass.
	g.Expect(firstSaid.IsZero()).To(BeFalse(), "Kubernetes was seen reporting %s", reason)
	if allSaid.IsZero() {
		g.Eventually(func() bool {
			n, of := kubernetesSays(t, k, key, reason)
			return n > 0 && n == of
		}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "Kubernetes was seen reporting %s for every pod", reason)
		allSaid = time.Now()
	}
	for _, step := range []struct {
		what        string
		said, named time.Time
	}{{"the reason", firstSaid, firstNamed}, {"the whole message", allSaid, allNamed}} {
		if step.said.After(step.named) {
			step.said = step.named // seen in the same poll
		}
		took := step.named.Sub(step.said)
		t.Logf("%s named in the status %s after Kubernetes reported it", step.what, took.Round(100*time.Millisecond))
		g.Expect(took).To(BeNumerically("<=", causeNamedWithin), "%s named within seconds of Kubernetes reporting it", step.what)
	}
	av := *meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionAvailable)
	t.Logf("reported: Available=%s %s: %s", av.Status, av.Reason, av.Message)
	g.Expect(av.Status).To(Equal(metav1.ConditionFalse))
	if stalled {
		g.Expect(meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionStalled).Reason).To(Equal(reason))
		degraded := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionDegraded)
		g.Expect(degraded).NotTo(BeNil())
		g.Expect(degraded.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(degraded.Reason).To(Equal(reason))
		g.Expect(kstatusOf(t, m)).To(Equal(status.FailedStatus))
	} else {
		g.Expect(meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionStalled).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionProgressing).Reason).To(Equal(reason))
		g.Expect(kstatusOf(t, m)).To(Equal(status.InProgressStatus))
	}
	events(t, cfg, key, reason)
}

// causeNamedWithin bounds the time from Kubernetes reporting a cause (a
// pod's state, the StatefulSet controller's event) to the status naming
// it: a watch event and a reconcile, well under a second here (a refused
// pod creation changes no status: it is looked for 5 s after the
// operator's apply, and every 5 s), and slack for a loaded machine and the
// two polls.
const causeNamedWithin = 10 * time.Second

// kubernetesSays tells how many of the Memcached key's pods Kubernetes
// reports reason's cause for yet, in their status (the kubelet's, the
// scheduler's), and of how many pods; the StatefulSet controller's
// refusals are told in its FailedCreate events, as one of one.
func kubernetesSays(t *testing.T, k client.Client, key client.ObjectKey, reason string) (n, of int) {
	t.Helper()
	if reason == cachev1alpha1.ReasonPodsForbidden {
		d := &appsv1.StatefulSet{}
		if err := k.Get(context.Background(), key, d); err != nil {
			return 0, 1
		}
		refusals := &corev1.EventList{}
		err := k.List(context.Background(), refusals, client.InNamespace(key.Namespace),
			client.MatchingFields{"involvedObject.uid": string(d.UID), "reason": "FailedCreate"})
		if err != nil || len(refusals.Items) == 0 {
			return 0, 1
		}
		return 1, 1
	}
	pods := &corev1.PodList{}
	if err := k.List(context.Background(), pods, client.InNamespace(key.Namespace), client.MatchingLabels{"app.kubernetes.io/instance": key.Name}); err != nil {
		return 0, 0
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		of++
		if podSays(p, reason) {
			n++
		}
	}
	return n, of
}

// podSays tells whether pod p's status reports reason's cause.
func podSays(p corev1.Pod, reason string) bool {
	for _, c := range p.Status.Conditions {
		if reason == cachev1alpha1.ReasonPodsUnschedulable && c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		waiting := ""
		if cs.State.Waiting != nil {
			waiting = cs.State.Waiting.Reason
		}
		switch {
		case reason == cachev1alpha1.ReasonImagePullFailed && (waiting == "ErrImagePull" || waiting == "ImagePullBackOff"):
			return true
		case reason == cachev1alpha1.ReasonContainerConfigInvalid && (strings.HasPrefix(waiting, "CreateContainer") || waiting == "RunContainerError" ||
			endedWith(cs, func(t *corev1.ContainerStateTerminated) bool { return t.Reason == "StartError" || t.ExitCode == 127 })):
			// Not started, or (under the warm runner) no memcached to run:
			// the runner exits 127 as a shell does.
			return true
		case reason == cachev1alpha1.ReasonContainerCrashing && (waiting == "CrashLoopBackOff" ||
			cs.RestartCount > 0 && cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode != 0):
			// Restarted after a failing exit: a crash, not a one-off.
			return true
		}
	}
	return false
}

// endedWith tells whether cs's current or last run ended as ended says.
func endedWith(cs corev1.ContainerStatus, ended func(*corev1.ContainerStateTerminated) bool) bool {
	return cs.State.Terminated != nil && ended(cs.State.Terminated) ||
		cs.LastTerminationState.Terminated != nil && ended(cs.LastTerminationState.Terminated)
}

// events checks that one Warning event on the Memcached key gave reason,
// whatever the number of pods and of the kubelet's retries, and still one
// a while later.
func events(t *testing.T, cfg *envconf.Config, key client.ObjectKey, reason string) {
	t.Helper()
	g := NewWithT(t)
	var found []eventsv1.Event
	g.Eventually(func(g Gomega) {
		found = eventsOf(g, t, cfg, key, reason)
		g.Expect(found).NotTo(BeEmpty())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "an event with reason %s", reason)
	g.Expect(found).To(HaveLen(1), "one event per cause")
	g.Expect(found[0].Type).To(Equal(corev1.EventTypeWarning))
	g.Expect(len(found[0].Note)).To(BeNumerically("<=", 1024))
	g.Consistently(func(g Gomega) {
		g.Expect(eventsOf(g, t, cfg, key, reason)).To(HaveLen(1), "one event per cause")
	}).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())
}

// eventsOf are the events on the Memcached key with reason.
func eventsOf(g Gomega, t *testing.T, cfg *envconf.Config, key client.ObjectKey, reason string) []eventsv1.Event {
	list := &eventsv1.EventList{}
	g.Expect(kube(t, cfg).List(context.Background(), list, client.InNamespace(key.Namespace))).To(Succeed())
	var found []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == cachev1alpha1.Kind && e.Regarding.Name == key.Name && e.Reason == reason {
			found = append(found, e)
		}
	}
	return found
}

// fix patches the Memcached key and waits until it has converged with size
// ready pods and no longer names a cause.
func fix(t *testing.T, cfg *envconf.Config, key client.ObjectKey, patch string, size int32) {
	t.Helper()
	g, k := NewWithT(t), kube(t, cfg)
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	g.Expect(k.Patch(context.Background(), m, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	converged(t, k, key, size)
	// The pods that had the cause go after the new ones are ready.
	g.Eventually(func(g Gomega) {
		m := &cachev1alpha1.Memcached{}
		g.Expect(k.Get(context.Background(), key, m)).To(Succeed())
		g.Expect(meta.IsStatusConditionFalse(m.Status.Conditions, cachev1alpha1.ConditionStalled)).To(BeTrue(), "not Stalled")
		g.Expect(meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionAvailable).Reason).To(Equal(cachev1alpha1.ReasonMinimumReplicasAvailable))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "the cause clears")
}

// availableWith is the first Available condition with reason among the
// states the watch saw so far, or nil.
func availableWith(w *memcachedWatch, reason string) *metav1.Condition {
	for _, m := range w.soFar() {
		if c := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionAvailable); c != nil && c.Reason == reason {
			return c
		}
	}
	return nil
}

// fill stores bytes of values in the Memcached key's pods, from this
// machine (the real node's pods' addresses are routed here).
func fill(t *testing.T, cfg *envconf.Config, key client.ObjectKey, bytes int) {
	t.Helper()
	g, k := NewWithT(t), kube(t, cfg)
	m := &cachev1alpha1.Memcached{}
	g.Expect(k.Get(context.Background(), key, m)).To(Succeed())
	pods := &corev1.PodList{}
	g.Expect(k.List(context.Background(), pods, client.InNamespace(key.Namespace), client.MatchingLabels(desired.SelectorLabels(m)))).To(Succeed())
	value := strings.Repeat("x", 512<<10)
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(p.Status.PodIP, "11211"), 5*time.Second)
		if err != nil {
			t.Logf("pod %s: %v", p.Name, err)
			continue
		}
		for i := 0; i*len(value) < bytes; i++ {
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := fmt.Fprintf(conn, "set fill-%d 0 0 %d noreply\r\n%s\r\n", i, len(value), value); err != nil {
				t.Logf("pod %s: stored %d values, then: %v", p.Name, i, err)
				break
			}
		}
		_ = conn.Close()
	}
}
