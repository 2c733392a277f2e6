package status

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/owned"
)

// Of one pod's problems the worst is told, and of two of the same rank the
// first container's.
func TestAPodsWorstProblemIsTold(t *testing.T) {
	twoContainers := func(first, second corev1.ContainerStatus) *owned.Pod {
		p := pod("a", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{first, second}})
		p.Containers[0].Image, p.Containers[1].Image = "first:1", "second:1"
		return p
	}
	crash := crashing.ContainerStatuses[0]
	pull := pullFailed.ContainerStatuses[0]
	pull.Name = "exporter"
	otherPull := pull
	otherPull.Name = "discovery"
	tests := []struct {
		name, reason, mentions string
		p                      *owned.Pod
	}{
		{"a pull failure after a crash", cachev1alpha1.ReasonImagePullFailed, "container exporter", twoContainers(crash, pull)},
		{"a pull failure before a crash", cachev1alpha1.ReasonImagePullFailed, "container exporter", twoContainers(pull, crash)},
		{"two pull failures", cachev1alpha1.ReasonImagePullFailed, "container exporter", twoContainers(pull, otherPull)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := podProblemOf(mc(3), Observation{StatefulSet: none, Pods: []*owned.Pod{tt.p}})
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.reason).To(Equal(tt.reason))
			g.Expect(p.message).To(ContainSubstring(tt.mentions))
		})
	}
}

// An OOM-killed memcached is told what to change from its memory limit
// (memcached's default of 64 MiB when unset) against the container's.
func TestAnOOMKillSaysWhichMemoryToChange(t *testing.T) {
	limited := func(memoryLimitMiB *int32, limit string) *cachev1alpha1.Memcached {
		m := mc(3)
		m.Spec.MemoryLimitMiB = memoryLimitMiB
		m.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}}
		return m
	}
	tests := []struct {
		name string
		m    *cachev1alpha1.Memcached
		hint string
	}{
		{"unset, against a smaller limit", limited(nil, "48Mi"), "memoryLimitMiB (64) is not below resources.limits.memory (48Mi)"},
		{"as large as the limit", limited(ptr.To[int32](48), "48Mi"), "memoryLimitMiB (48) is not below resources.limits.memory (48Mi)"},
		{"below the limit", limited(ptr.To[int32](32), "48Mi"), "memoryLimitMiB (32) leaves too little of resources.limits.memory (48Mi)"},
		{"no limit", mc(3), "need more memory than the node or namespace allows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := podProblemOf(tt.m, Observation{StatefulSet: none, Pods: []*owned.Pod{pod("a", oomKilled)}})
			NewWithT(t).Expect(p.message).To(ContainSubstring(tt.hint))
		})
	}
}

// A container in a crash loop whose last end Kubernetes does not tell is
// said to have given no reason.
func TestACrashWithoutAReasonSaysSo(t *testing.T) {
	p := podProblemOf(mc(3), Observation{StatefulSet: none, Pods: []*owned.Pod{pod("a", waiting("CrashLoopBackOff", "back-off", 1, nil))}})
	NewWithT(t).Expect(p.message).To(ContainSubstring("exits at start (no reason given, exit code 0, restarted once)"))
}

// A rollout names a failed reload only when a pod failed one and the
// StatefulSet restarts the pods for it, and adds the note on the pods
// left only when there is one.
func TestARolloutsMessageSaysOnlyWhatIsSo(t *testing.T) {
	failed := pod("a", corev1.PodStatus{})
	failed.ReloadFailed = "refresh_certs failed"
	restartingFor := rolling.DeepCopy()
	restartingFor.RestartedFor = "digest"
	tests := []struct {
		name          string
		obs           Observation
		reason, whole string
	}{
		{"a failed reload the pods restart for", Observation{StatefulSet: restartingFor, Pods: []*owned.Pod{failed}}, cachev1alpha1.ReasonReloadFailed, ""},
		{"a failed reload, no restart for it", Observation{StatefulSet: rolling, Pods: []*owned.Pod{failed}}, "", "1 of 3 pods updated"},
		{"a restart for a reload, no pod failed", Observation{StatefulSet: restartingFor, Pods: []*owned.Pod{pod("a", corev1.PodStatus{})}}, "", "1 of 3 pods updated"},
		{"no note on the pods left", Observation{StatefulSet: rolling}, "", "1 of 3 pods updated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := rolloutOf(mc(3), tt.obs)
			g.Expect(r.reason).To(Equal(tt.reason))
			if tt.whole != "" {
				g.Expect(r.message).To(HavePrefix(tt.whole))
				g.Expect(r.message).NotTo(HaveSuffix("; "))
			}
		})
	}
}

// While a Deployment is replaced, Available counts the slots ready and
// the Deployment's pods apart.
func TestAvailableCountsSlotsAndTheReplacedDeploymentApart(t *testing.T) {
	c := available(mc(3), Observation{StatefulSet: statefulSet(3, 3, 1, 1, 2), Replaced: oldDeployment(2), Replacing: "x"})
	NewWithT(t).Expect(c.Message).To(HavePrefix("1 of 3 slots ready; 2 pods of Deployment cache serve"))
}

// A membership ConfigMap that is not the Memcached's is named by its own
// name, not the Memcached's.
func TestAForeignMembershipIsNamedByItsName(t *testing.T) {
	r := rolloutOf(mc(3), Observation{StatefulSet: rolling, NotOwned: []owned.Kind{owned.KindConfigMap}})
	g := NewWithT(t)
	g.Expect(r.reason).To(Equal(cachev1alpha1.ReasonConfigMapNotOwned))
	g.Expect(r.message).To(ContainSubstring("ConfigMap cache-membership"))
}

// A replaced Deployment with no pod left that serves is not counted.
func TestAReplacedDeploymentWithNoPodServingIsNotCounted(t *testing.T) {
	c := available(mc(3), Observation{StatefulSet: statefulSet(3, 3, 1, 1, 2), Replaced: oldDeployment(0), Replacing: "x"})
	NewWithT(t).Expect(c.Message).To(HavePrefix("1 of 3 pods ready"))
}
