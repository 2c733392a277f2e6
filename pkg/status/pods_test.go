package status

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/owned"
)

// pod is a summary of one of the Memcached's pods, built as the store does
// from a pod with the given status.
func pod(name string, st corev1.PodStatus) *owned.Pod {
	return owned.SummarizePod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns",
			Labels:          map[string]string{appsv1.ControllerRevisionHashLabelKey: "cache-5d8f"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "cache", UID: "uid-cache", Controller: ptr.To(true)}},
		},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: "localhost/memcached:nope"}}},
		Status: st,
	})
}

func waiting(reason, message string, restarts int32, last *corev1.ContainerStateTerminated) corev1.PodStatus {
	return corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name: "memcached", RestartCount: restarts,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}},
		LastTerminationState: corev1.ContainerState{Terminated: last},
	}}}
}

var (
	pullFailed  = waiting("ImagePullBackOff", `Back-off pulling image "localhost/memcached:nope"`, 0, nil)
	crashing    = waiting("CrashLoopBackOff", "back-off 20s restarting failed container", 3, &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 71, Message: "starting\nfailed to listen on TCP port 11211: Address in use\n"})
	oomKilled   = waiting("CrashLoopBackOff", "back-off 10s restarting failed container", 2, &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137})
	configError = waiting("CreateContainerConfigError", `secret "cache-tls" not found`, 0, nil)
	startError  = waiting("CrashLoopBackOff", "back-off 10s restarting failed container", 1, &corev1.ContainerStateTerminated{Reason: "StartError", ExitCode: 128,
		Message: `failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "memcached": executable file not found in $PATH: unknown`})
	// The same image under the warm runner (cmd/warm), which starts memcached itself.
	warmStartError = waiting("CrashLoopBackOff", "back-off 10s restarting failed container", 2, &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 127,
		Message: `starting memcached: exec: "memcached": executable file not found in $PATH`})
	starting     = waiting("ContainerCreating", "", 0, nil)
	unschedulabl = corev1.PodStatus{Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 Insufficient cpu.",
	}}}
	quota = `create Pod cache-2 in StatefulSet cache failed error: pods "cache-2" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=0, limited: pods=0`
	none  = statefulSet(3, 3, 0, 0, 2)
)

// Each cause Kubernetes reports is in the conditions, named as Kubernetes
// names it, with how many pods it affects; what needs a person is Stalled,
// what an autoscaler can end (an unschedulable pod) is not.
func TestPodProblemsAreNamed(t *testing.T) {
	limited := mc(3)
	limited.Spec.MemoryLimitMiB = ptr.To[int32](64)
	limited.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("48Mi")}}
	tests := []struct {
		name        string
		m           *cachev1alpha1.Memcached
		obs         Observation
		reason      string
		stalled     bool
		mentions    []string
		kstatusWant kstatus.Status
	}{
		{"image pull", mc(3), Observation{StatefulSet: none, Pods: []*owned.Pod{pod("a", pullFailed), pod("b", pullFailed), pod("c", starting)}},
			cachev1alpha1.ReasonImagePullFailed, true, []string{"2 of 3 pods", "localhost/memcached:nope", "ImagePullBackOff", "spec.image"}, kstatus.FailedStatus},
		{"crash at start", mc(3), Observation{StatefulSet: none, Pods: []*owned.Pod{pod("a", crashing)}},
			cachev1alpha1.ReasonContainerCrashing, true, []string{"Container memcached of 1 of 3 pods", "exit code 71", "restarted 3 times", "failed to listen on TCP port 11211: Address in use"}, kstatus.FailedStatus},
		{"OOM kill", limited, Observation{StatefulSet: none, Pods: []*owned.Pod{pod("a", oomKilled)}},
			cachev1alpha1.ReasonOOMKilled, true, []string{"OOMKilled", "exit code 137", "memoryLimitMiB (64) is not below resources.limits.memory (48Mi)"}, kstatus.FailedStatus},
		{"container config", mc(3), Observation{StatefulSet: none, Pods: []*owned.Pod{pod("a", configError)}},
			cachev1alpha1.ReasonContainerConfigInvalid, true, []string{"CreateContainerConfigError", `secret "cache-tls" not found`}, kstatus.FailedStatus},
		{"no memcached in the image", mc(3), Observation{StatefulSet: none, Pods: []*owned.Pod{pod("a", startError), pod("b", startError)}},
			cachev1alpha1.ReasonContainerConfigInvalid, true, []string{"2 of 3 pods cannot start container memcached (StartError, exit code 128, restarted once)", `exec: "memcached": executable file not found in $PATH`, "spec.image"}, kstatus.FailedStatus},
		{"no memcached in the image, run warm", mc(3), Observation{StatefulSet: none, Pods: []*owned.Pod{pod("a", warmStartError)}},
			cachev1alpha1.ReasonContainerConfigInvalid, true, []string{"1 of 3 pods cannot start container memcached (Error, exit code 127, restarted 2 times)", `exec: "memcached": executable file not found in $PATH`, "spec.image"}, kstatus.FailedStatus},
		{"unschedulable", mc(3), Observation{StatefulSet: none, Pods: []*owned.Pod{pod("a", unschedulabl), pod("b", unschedulabl), pod("c", unschedulabl)}},
			cachev1alpha1.ReasonPodsUnschedulable, false, []string{"3 of 3 pods cannot be scheduled", "Insufficient cpu"}, kstatus.InProgressStatus},
		{"quota", mc(3), Observation{StatefulSet: statefulSet(3, 0, 0, 0, 2), CreateFailed: quota},
			cachev1alpha1.ReasonPodsForbidden, true, []string{"StatefulSet cache", "exceeded quota"}, kstatus.FailedStatus},
		{"the worst cause first", mc(3), Observation{StatefulSet: none, Pods: []*owned.Pod{pod("a", unschedulabl), pod("b", crashing), pod("c", pullFailed)}},
			cachev1alpha1.ReasonImagePullFailed, true, []string{"1 of 3 pods"}, kstatus.FailedStatus},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			av := available(tt.m, tt.obs)
			g.Expect(av.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(av.Reason).To(Equal(tt.reason))
			g.Expect(av.Message).To(HavePrefix("0 of 3 pods ready: "))
			for _, s := range tt.mentions {
				g.Expect(av.Message).To(ContainSubstring(s))
			}
			stalled, progressing := Stalled(tt.m, tt.obs), progressing(tt.m, tt.obs)
			if tt.stalled {
				g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(stalled.Reason).To(Equal(tt.reason))
				g.Expect(progressing.Status).To(Equal(metav1.ConditionFalse))
			} else {
				g.Expect(stalled.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(progressing.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(progressing.Reason).To(Equal(tt.reason))
			}
			g.Expect(kstatusOf(g, tt.m, tt.obs)).To(Equal(tt.kstatusWant))
		})
	}
}

// A cause clears with the pods that had it: pods that only start say
// nothing, and a complete rollout ignores what pods said before.
func TestPodProblemsClear(t *testing.T) {
	g := NewWithT(t)
	m := mc(3)
	obs := Observation{StatefulSet: none, Pods: []*owned.Pod{pod("a", starting), pod("b", corev1.PodStatus{})}}
	g.Expect(available(m, obs).Reason).To(Equal(cachev1alpha1.ReasonMinimumReplicasUnavailable))
	g.Expect(Stalled(m, obs).Status).To(Equal(metav1.ConditionFalse))
	g.Expect(progressing(m, obs).Reason).To(Equal(cachev1alpha1.ReasonRollingOut))

	obs = Observation{StatefulSet: complete, Pods: []*owned.Pod{pod("a", crashing)}}
	g.Expect(available(m, obs).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(Stalled(m, obs).Status).To(Equal(metav1.ConditionFalse))
	g.Expect(progressing(m, obs).Reason).To(Equal(cachev1alpha1.ReasonRolloutComplete))
}

// A bad image rolled over a serving cache: it keeps serving (available),
// and the rollout is Stalled with the pull error, not "RollingOut".
func TestPodProblemOfARolloutOverServingPods(t *testing.T) {
	g := NewWithT(t)
	m := mc(3)
	obs := Observation{StatefulSet: statefulSet(3, 1, 3, 3, 2), Pods: []*owned.Pod{pod("new", pullFailed)}}
	g.Expect(available(m, obs).Status).To(Equal(metav1.ConditionTrue))
	s := Stalled(m, obs)
	g.Expect(s.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(s.Reason).To(Equal(cachev1alpha1.ReasonImagePullFailed))
	g.Expect(meta.IsStatusConditionTrue([]metav1.Condition{progressing(m, obs)}, cachev1alpha1.ConditionProgressing)).To(BeFalse())
}

func kstatusOf(g Gomega, m *cachev1alpha1.Memcached, obs Observation) kstatus.Status {
	m = m.DeepCopy()
	raw, err := json.Marshal(Status(m, obs, metav1.Now()))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(raw, &m.Status)).To(Succeed())
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: u})
	g.Expect(err).NotTo(HaveOccurred())
	return res.Status
}
