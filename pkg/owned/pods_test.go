package owned_test

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/reload"
)

// podOf is slot 0 of StatefulSet set, of UID "uid-"+set.
func podOf(set, _ string, st corev1.PodStatus) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: set + "-0", Namespace: "ns", ResourceVersion: "7",
			Labels:      map[string]string{appsv1.ControllerRevisionHashLabelKey: set + "-5d8f", "team": "a"},
			Annotations: map[string]string{"big": "annotation"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: set,
				UID: types.UID("uid-" + set), Controller: ptr.To(true)}},
		},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: "memcached:1"}, {Name: "exporter", Image: "exporter:1"}}},
		Status: st,
	}
}

// A pod summary keeps what tells why the pod is not ready and nothing
// else: a pod that starts as it should says nothing.
func TestPodSummaryKeepsOnlyWhyItIsNotReady(t *testing.T) {
	g := NewWithT(t)
	starting := corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{Name: "memcached", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
		{Name: "exporter", Ready: true},
	}}
	p := owned.SummarizePod(podOf("cache", "", starting))
	g.Expect(p.Controller).To(Equal(types.UID("uid-cache")), "attributed by its StatefulSet's UID")
	g.Expect(p.StatefulSet).To(Equal("cache"))
	g.Expect(p.Troubled()).To(BeFalse())
	g.Expect(p.Labels).To(BeEmpty())
	g.Expect(p.Annotations).To(BeEmpty())

	failing := corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{Name: "memcached", RestartCount: 2,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 71, Message: "failed to listen"}}},
		{Name: "exporter", Ready: true},
	}}
	p = owned.SummarizePod(podOf("cache", "", failing))
	g.Expect(p.Troubled()).To(BeTrue())
	g.Expect(p.Containers).To(Equal([]owned.ContainerProblem{{
		Name: "memcached", Image: "memcached:1", RestartCount: 2, Waiting: "CrashLoopBackOff", Message: "back-off",
		Terminated: "Error", ExitCode: 71, TerminatedMessage: "failed to listen",
	}}))

	// The reloader's init container refusing the mounted Secrets is why
	// the pod does not start; once it has done its work it says nothing.
	preparing := corev1.PodStatus{
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "reloader-prepare", RestartCount: 1,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, Message: "the mounted certificate is not fit to serve"}}}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "memcached", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}},
	}
	p = owned.SummarizePod(podOf("cache", "", preparing))
	g.Expect(p.Containers).To(Equal([]owned.ContainerProblem{{
		Name: "reloader-prepare", RestartCount: 1, Waiting: "CrashLoopBackOff", Message: "back-off",
		Terminated: "Error", ExitCode: 1, TerminatedMessage: "the mounted certificate is not fit to serve",
	}}))
	prepared := corev1.PodStatus{
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "reloader-prepare",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", ExitCode: 0}}}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "memcached", Ready: true}},
	}
	g.Expect(owned.SummarizePod(podOf("cache", "", prepared)).Troubled()).To(BeFalse())

	going := podOf("cache", "", failing)
	going.DeletionTimestamp = &metav1.Time{}
	g.Expect(owned.SummarizePod(going).Troubled()).To(BeFalse(), "a terminating pod no longer stands in the way")

	// A pod of a ReplicaSet, a pod controlled by nothing: no StatefulSet's.
	rsPod := podOf("cache", "", starting)
	rsPod.OwnerReferences[0].Kind = "ReplicaSet"
	g.Expect(owned.SummarizePod(rsPod).Controller).To(BeEmpty())
	bare := podOf("cache", "", starting)
	bare.OwnerReferences = nil
	g.Expect(owned.SummarizePod(bare).Controller).To(BeEmpty())

	// Summaries that differ only in resourceVersion say the same.
	a, b := owned.SummarizePod(podOf("cache", "", failing)), owned.SummarizePod(podOf("cache", "", failing))
	b.ResourceVersion = "8"
	g.Expect(owned.SamePod(a, b)).To(BeTrue())
	b.Containers[0].RestartCount = 3
	g.Expect(owned.SamePod(a, b)).To(BeFalse())
}

// A reloader that ended on a failed reload says so, whether it is
// restarting or running again, and is not taken for a crashing container;
// one that ended otherwise is.
func TestPodSummaryTellsAFailedReload(t *testing.T) {
	g := NewWithT(t)
	failed := &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: reload.FailedExitCode, Message: "memcached did not load the new certificate"}
	for name, st := range map[string]corev1.ContainerStatus{
		"ended":   {Name: desired.ReloaderContainerName, State: corev1.ContainerState{Terminated: failed}},
		"waiting": {Name: desired.ReloaderContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, LastTerminationState: corev1.ContainerState{Terminated: failed}},
		"running": {Name: desired.ReloaderContainerName, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, LastTerminationState: corev1.ContainerState{Terminated: failed}},
	} {
		p := owned.SummarizePod(podOf("cache", "", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{st}}))
		g.Expect(p.ReloadFailed).To(Equal(failed.Message), name)
		g.Expect(p.Containers).To(BeEmpty(), name)
		g.Expect(p.Troubled()).To(BeTrue(), name)
	}
	crashed := corev1.ContainerStatus{Name: desired.ReloaderContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}
	p := owned.SummarizePod(podOf("cache", "", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{crashed}}))
	g.Expect(p.ReloadFailed).To(BeEmpty())
	g.Expect(p.Containers).To(HaveLen(1))
}

// A pod that can take a template in place keeps the size of its memory
// volume: the largest memory limit its memcached can take in place.
func TestPodSummaryKeepsTheMemoryVolumeOfAPodThatRollsInPlace(t *testing.T) {
	g := NewWithT(t)
	p := podOf("cache", "", corev1.PodStatus{})
	p.Spec.Volumes = []corev1.Volume{{Name: desired.MemoryVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("65Mi"))}}}}
	g.Expect(owned.SummarizePod(p).MemoryVolume).To(BeNil(), "no shape: the pod is replaced for any change")
	p.Annotations[desired.AnnotationPodShape] = "s"
	g.Expect(owned.SummarizePod(p).MemoryVolume).To(Equal(ptr.To(resource.MustParse("65Mi"))))
}
