package owned

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/reload"
)

// kindPod is the kind of the Memcacheds' pods, which the store watches
// (read only) to tell why a Memcached is not ready.
const kindPod Kind = "Pod"

// Pod is what the operator keeps of one of its pods: what tells why it is
// not ready, and nothing else. With many Memcacheds their pods are the most
// numerous objects the operator watches.
//
// Its metadata holds only the name, namespace, UID and resourceVersion.
//
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
type Pod struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Controller is the UID of the StatefulSet that controls the pod: the
	// pods of a Memcached are those of its StatefulSet, whatever labels or
	// names another pod has. Empty for a pod no StatefulSet controls.
	Controller types.UID `json:"controller,omitempty"`
	// StatefulSet is the name of that StatefulSet, which is its
	// Memcached's: whose reconcile the pod's news starts.
	StatefulSet string `json:"statefulSet,omitempty"`
	// IP is the pod's address, once it has one: a slot's, for the
	// membership the discovery endpoint serves.
	IP string `json:"ip,omitempty"`
	// Port is the pod's container port named desired.PortName, where its
	// memcached serves clients: a slot's, for the membership too.
	Port int32 `json:"port,omitempty"`
	// Unschedulable is the scheduler's message while it cannot place the
	// pod.
	Unschedulable string `json:"unschedulable,omitempty"`
	// Containers are the pod's containers that are not ready and say why
	// (waiting for a reason other than starting, or ended), in the pod's
	// order.
	Containers []ContainerProblem `json:"containers,omitempty"`
	// ReloadFailed is why the pod's reloader could not have memcached load
	// new Secret content in place (its termination message), when it
	// could not; the operator then restarts the pods.
	ReloadFailed string `json:"reloadFailed,omitempty"`

	// Revision is the pod's controller-revision-hash label: the revision
	// of its StatefulSet it runs.
	Revision string `json:"revision,omitempty"`
	// Shape is the pod's desired.AnnotationPodShape: which templates it
	// can take in place.
	Shape string `json:"shape,omitempty"`
	// Labels and Annotations are the pod's, where it has a Shape (it can
	// take a template's in place).
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Ready: the pod's Ready condition is True.
	Ready bool `json:"ready,omitempty"`
	// Deleting: the pod is being deleted.
	Deleting bool `json:"deleting,omitempty"`
	// Images are the pod's containers and their images, in the pod's
	// order: the init containers first.
	Images []ContainerImage `json:"images,omitempty"`
	// MemcachedID is the ID of the memcached container's current run.
	MemcachedID string `json:"memcachedID,omitempty"`
	// MembershipVersion is the pod's desired.AnnotationMembershipVersion:
	// the membership it was last told of.
	MembershipVersion string `json:"membershipVersion,omitempty"`
	// MembershipSeal is the pod's desired.AnnotationMembershipSeal: the
	// seal of the membership and move it was last told of.
	MembershipSeal string `json:"membershipSeal,omitempty"`
	// MembershipRetold is the pod's desired.AnnotationMembershipRetold.
	MembershipRetold string `json:"membershipRetold,omitempty"`
	// SecretsDigest is the pod's desired.AnnotationSecretsDigest.
	SecretsDigest string `json:"secretsDigest,omitempty"`
	// RestartingFrom is the pod's desired.AnnotationRestartingFrom: the
	// memcached container the operator restarted in place, until it
	// confirmed the restart.
	RestartingFrom string `json:"restartingFrom,omitempty"`
	// Resources are the memcached container's resources in the pod's
	// spec, and Resized those the kubelet says it runs with (its status;
	// nil from a kubelet that does not resize pods in place), where the
	// pod has a Shape.
	Resources corev1.ResourceRequirements  `json:"resources,omitempty"`
	Resized   *corev1.ResourceRequirements `json:"resized,omitempty"`
	// MemoryVolume is the size of the pod's memory volume
	// (desired.MemoryVolumeName), where the pod has a Shape: the largest
	// memory limit its memcached can take in place.
	MemoryVolume *resource.Quantity `json:"memoryVolume,omitempty"`
	// Resizing is the reason and message of the pod's PodResizePending
	// or PodResizeInProgress condition ("Infeasible: ..."), while the
	// kubelet has not made a resize in place.
	Resizing string `json:"resizing,omitempty"`
	// ResizeFailed: that condition says the resize cannot be made
	// (Infeasible, or Error while making it).
	ResizeFailed bool `json:"resizeFailed,omitempty"`
}

// ContainerImage is a container of a pod's spec and its image.
type ContainerImage struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	// Init: an init container.
	Init bool `json:"init,omitempty"`
}

// Key names the container among a pod's containers and init containers.
func (c ContainerImage) Key() string {
	if c.Init {
		return "init/" + c.Name
	}
	return c.Name
}

// ContainerProblem is the state of a container that is not ready.
type ContainerProblem struct {
	// Name is the container's name.
	Name string `json:"name"`
	// Image is the image the pod asks for.
	Image string `json:"image,omitempty"`
	// RestartCount is how often the kubelet restarted it.
	RestartCount int32 `json:"restartCount,omitempty"`
	// Waiting is why it does not run (ErrImagePull, CrashLoopBackOff,
	// CreateContainerConfigError, ...), and Message the kubelet's words.
	Waiting string `json:"waiting,omitempty"`
	Message string `json:"message,omitempty"`
	// Terminated is how its last run ended (Error, OOMKilled, ...), when
	// it ended: with ExitCode, and the termination message (the end of
	// its log when it failed).
	Terminated        string `json:"terminated,omitempty"`
	ExitCode          int32  `json:"exitCode,omitempty"`
	TerminatedMessage string `json:"terminatedMessage,omitempty"`
}

// SummarizePod returns the summary of one of the operator's pods: the
// fields the operator sets on it (PodFields), and why it is not ready.
func SummarizePod(p *corev1.Pod) *Pod {
	s := &Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: string(kindPod)},
		ObjectMeta: metav1.ObjectMeta{
			Name:            p.Name,
			Namespace:       p.Namespace,
			UID:             p.UID,
			ResourceVersion: p.ResourceVersion,
		},
	}
	ref := statefulSetOf(p)
	if ref == nil {
		// Labelled as the operator's, but no StatefulSet's: the operator
		// reads no such pod (Store.Pods finds pods by their StatefulSet),
		// and keeps nothing more of it, whatever it carries.
		return s
	}
	s.Controller, s.StatefulSet = ref.UID, ref.Name
	s.IP = p.Status.PodIP
	s.Port = servingPort(p)
	// Going away: what it says no longer stands in the way.
	s.Deleting = p.DeletionTimestamp != nil
	for _, f := range PodFields {
		if f.Read != nil && (!s.Deleting || f.ReadWhileDeleting) {
			f.Read(p, s)
		}
	}
	if !s.Deleting {
		readConditions(p, s)
		readContainerProblems(p, s)
	}
	return s
}

// readConditions reads whether p is ready, and why the scheduler cannot
// place it.
func readConditions(p *corev1.Pod, s *Pod) {
	for _, c := range p.Status.Conditions {
		switch {
		case c.Type == corev1.PodReady:
			s.Ready = c.Status == corev1.ConditionTrue
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable:
			s.Unschedulable = c.Message
		}
	}
}

// readContainerProblems reads why p's containers are not ready, the init
// containers first (the reloader checking the mounted Secrets before
// memcached starts), as the pod runs them, and whether its reloader
// failed.
func readContainerProblems(p *corev1.Pod, s *Pod) {
	images := map[string]string{}
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		images[c.Name] = c.Image
	}
	initContainer := map[string]bool{}
	for _, st := range p.Status.InitContainerStatuses {
		initContainer[st.Name] = true
	}
	for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if st.Name == desired.ReloaderContainerName {
			// Its exit on a failed reload is how it tells, not a crash.
			if t := reloadFailure(st); t != nil {
				s.ReloadFailed = t.Message
				continue
			}
		}
		if st.Ready || (initContainer[st.Name] && st.State.Terminated != nil && st.State.Terminated.ExitCode == 0) {
			// Ready, or an init container that did its work.
			continue
		}
		if c, ok := containerProblem(st, images[st.Name]); ok {
			s.Containers = append(s.Containers, c)
		}
	}
}

// containerProblem is what st, the status of a container of image that is
// not ready, says of why; ok is false when it says nothing (it starts).
func containerProblem(st corev1.ContainerStatus, image string) (ContainerProblem, bool) {
	c := ContainerProblem{Name: st.Name, Image: image, RestartCount: st.RestartCount}
	if w := st.State.Waiting; w != nil && !startingReasons[w.Reason] {
		c.Waiting, c.Message = w.Reason, w.Message
	}
	t := st.State.Terminated
	if t == nil {
		t = st.LastTerminationState.Terminated
	}
	if t != nil {
		c.Terminated, c.ExitCode, c.TerminatedMessage = t.Reason, t.ExitCode, t.Message
	}
	return c, c.Waiting != "" || c.Terminated != ""
}

// reloadFailure is the reloader's last run when it ended on a failed
// reload, or nil.
func reloadFailure(st corev1.ContainerStatus) *corev1.ContainerStateTerminated {
	for _, t := range []*corev1.ContainerStateTerminated{st.State.Terminated, st.LastTerminationState.Terminated} {
		if t != nil {
			if t.ExitCode == reload.FailedExitCode {
				return t
			}
			return nil
		}
	}
	return nil
}

// startingReasons are the reasons a container waits for while it starts
// as it should.
var startingReasons = map[string]bool{"": true, "ContainerCreating": true, "PodInitializing": true}

// Troubled tells whether p says something the operator acts on: why it is
// not ready (the scheduler cannot place it, or a container of it waits for
// a reason other than starting, or ended), or that its reloader failed. A
// pod that starts as it should says nothing.
func (p *Pod) Troubled() bool {
	return p.Unschedulable != "" || len(p.Containers) > 0 || p.ReloadFailed != ""
}

// statefulSetOf is the reference to the StatefulSet that controls p, or nil.
func statefulSetOf(p *corev1.Pod) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || ref.Kind != "StatefulSet" || ref.APIVersion != appsv1.SchemeGroupVersion.String() {
		return nil
	}
	return ref
}

// SamePod tells whether two summaries of a pod say the same, whatever
// their resourceVersions: a pod's status changes often in ways the
// operator does not keep.
func SamePod(a, b *Pod) bool {
	x, y := a.DeepCopy(), b.DeepCopy()
	x.ResourceVersion, y.ResourceVersion = "", ""
	return equality.Semantic.DeepEqual(x, y)
}

// servingPort is p's container port named desired.PortName; 0 where it
// names none.
func servingPort(p *corev1.Pod) int32 {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == desired.PortName {
				return port.ContainerPort
			}
		}
	}
	return 0
}
