package status

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/warm"
)

// memcachedDefaultMemoryMiB is memcached's own item memory when
// memoryLimitMiB is unset (its -m default).
const memcachedDefaultMemoryMiB = 64

// podProblem is why pods of a Memcached are not ready, as Kubernetes
// reports it: the kubelet (pull, start, exit, OOM kill), the scheduler,
// or the StatefulSet controller (pods refused at creation).
type podProblem struct {
	reason  string
	message string
	// stalled: it lasts until a person changes something (the spec, an
	// image, a quota). An unschedulable pod is not stalled: a node added
	// by a person or an autoscaler places it.
	stalled bool
}

// problemRank orders the reasons: the first that any pod has is the one
// reported. What stops every pod of a rollout (an image, a container's
// configuration) comes before what stops some.
var problemRank = []string{
	cachev1alpha1.ReasonPodsForbidden,
	cachev1alpha1.ReasonImagePullFailed,
	cachev1alpha1.ReasonContainerConfigInvalid,
	cachev1alpha1.ReasonOOMKilled,
	cachev1alpha1.ReasonContainerCrashing,
	cachev1alpha1.ReasonPodsUnschedulable,
}

// podProblemOf is why m's pods are not ready, if Kubernetes says why: nil
// when no pod has a problem (pods being created or starting have none).
func podProblemOf(m *cachev1alpha1.Memcached, obs Observation) *podProblem {
	if obs.CreateFailed != "" {
		return &podProblem{
			reason:  cachev1alpha1.ReasonPodsForbidden,
			message: fmt.Sprintf("Pods of StatefulSet %s cannot be created: %s", m.Name, obs.CreateFailed),
			stalled: true,
		}
	}
	found := map[string][]podFinding{}
	for _, p := range obs.Pods {
		if f, ok := findingOf(p); ok {
			found[f.reason] = append(found[f.reason], f)
		}
	}
	for _, reason := range problemRank {
		if fs := found[reason]; len(fs) > 0 {
			return explain(m, reason, fs)
		}
	}
	return nil
}

// podFinding is what is wrong with one pod.
type podFinding struct {
	reason    string
	container owned.ContainerProblem
	scheduler string
}

// findingOf is the first thing wrong with pod p, in problemRank's order.
func findingOf(p *owned.Pod) (podFinding, bool) {
	var best podFinding
	rank := len(problemRank)
	consider := func(f podFinding) {
		for i, r := range problemRank {
			if r == f.reason && i < rank {
				best, rank = f, i
			}
		}
	}
	if p.Unschedulable != "" {
		consider(podFinding{reason: cachev1alpha1.ReasonPodsUnschedulable, scheduler: p.Unschedulable})
	}
	for _, c := range p.Containers {
		switch {
		case c.Waiting == "ErrImagePull" || c.Waiting == "ImagePullBackOff" || c.Waiting == "InvalidImageName" || c.Waiting == "ErrImageNeverPull":
			consider(podFinding{reason: cachev1alpha1.ReasonImagePullFailed, container: c})
		case c.Waiting == "CreateContainerConfigError" || c.Waiting == "CreateContainerError" || c.Waiting == "RunContainerError",
			cannotStart(c):
			consider(podFinding{reason: cachev1alpha1.ReasonContainerConfigInvalid, container: c})
		case c.Terminated == "OOMKilled":
			consider(podFinding{reason: cachev1alpha1.ReasonOOMKilled, container: c})
		case c.Waiting == "CrashLoopBackOff" || (c.Terminated != "" && c.ExitCode != 0 && c.RestartCount > 0):
			consider(podFinding{reason: cachev1alpha1.ReasonContainerCrashing, container: c})
		}
	}
	return best, rank < len(problemRank)
}

// startFailures are the reasons a container's run ends with when the
// runtime could not start its process at all (its command is not in the
// image, say): not a crash of the program, and no restart mends it.
var startFailures = map[string]bool{"StartError": true, "ContainerCannotRun": true}

// cannotStart tells whether container c's process could not be started:
// by the runtime, or, when memcached runs warm, by the runner that starts
// it (cmd/warm), which exits with its own code for that.
func cannotStart(c owned.ContainerProblem) bool {
	return startFailures[c.Terminated] ||
		(c.Name == desired.ContainerName && c.Terminated == "Error" && c.ExitCode == warm.CannotStartExitCode)
}

// explain says what the findings of one reason mean: how many pods, what
// Kubernetes said, and what to change when it is one of the Memcached's
// settings.
func explain(m *cachev1alpha1.Memcached, reason string, fs []podFinding) *podProblem {
	f := fs[0]
	c := f.container
	pods := fmt.Sprintf("%d of %d pods", len(fs), desired.Replicas(m))
	p := &podProblem{reason: reason, stalled: true}
	switch reason {
	case cachev1alpha1.ReasonImagePullFailed:
		p.message = fmt.Sprintf("%s cannot pull image %s for container %s (%s): %s", pods, c.Image, c.Name, c.Waiting, c.Message)
		p.message = withHint(p.message, "check spec.image (or the operator's default image) and spec.imagePullSecrets")
	case cachev1alpha1.ReasonContainerConfigInvalid:
		if cannotStart(c) {
			// The runtime could not run it (no memcached in the image):
			// its words are the termination's, the waiting is a back-off.
			p.message = fmt.Sprintf("%s cannot start container %s (%s, exit code %d%s): %s", pods, c.Name, c.Terminated, c.ExitCode, restarts(c), lastLine(c.TerminatedMessage))
			if c.Name == desired.ContainerName {
				p.message = withHint(p.message, "check that spec.image (or the operator's default image) is a memcached image: the pods run memcached from its PATH")
			}
			break
		}
		p.message = fmt.Sprintf("%s cannot start container %s (%s): %s", pods, c.Name, c.Waiting, c.Message)
	case cachev1alpha1.ReasonOOMKilled:
		p.message = fmt.Sprintf("Container %s of %s was killed for using more memory than its limit (OOMKilled, exit code %d%s)", c.Name, pods, c.ExitCode, restarts(c))
		p.message = withHint(p.message, memoryHint(m, c.Name))
	case cachev1alpha1.ReasonContainerCrashing:
		p.message = fmt.Sprintf("Container %s of %s exits at start (%s, exit code %d%s)", c.Name, pods, orUnknown(c.Terminated), c.ExitCode, restarts(c))
		if last := lastLine(c.TerminatedMessage); last != "" {
			p.message += ": " + last
		}
	case cachev1alpha1.ReasonPodsUnschedulable:
		p.stalled = false
		p.message = fmt.Sprintf("%s cannot be scheduled: %s", pods, f.scheduler)
	}
	return p
}

// memoryHint is what to change for an OOM-killed container: for memcached,
// memoryLimitMiB against resources.limits.memory.
func memoryHint(m *cachev1alpha1.Memcached, container string) string {
	if container != desired.ContainerName {
		return "raise the container's memory limit"
	}
	items := int64(memcachedDefaultMemoryMiB)
	if v := m.Spec.MemoryLimitMiB; v != nil {
		items = int64(*v)
	}
	var limit resource.Quantity
	if r := m.Spec.Resources; r != nil {
		limit = r.Limits[corev1.ResourceMemory]
	}
	if limit.IsZero() {
		return "memcached's items and connections need more memory than the node or namespace allows: raise resources.limits.memory or lower memoryLimitMiB"
	}
	if items*1024*1024 >= limit.Value() {
		return fmt.Sprintf("memoryLimitMiB (%d) is not below resources.limits.memory (%s), and memcached needs room beyond its items for connections and threads: lower memoryLimitMiB or raise the limit", items, limit.String())
	}
	return fmt.Sprintf("memoryLimitMiB (%d) leaves too little of resources.limits.memory (%s) for connections and threads: lower memoryLimitMiB or raise the limit", items, limit.String())
}

func withHint(message, hint string) string {
	return strings.TrimRight(message, ". ") + "; " + hint
}

// restarts tells how often the kubelet restarted the container, if it did.
func restarts(c owned.ContainerProblem) string {
	switch c.RestartCount {
	case 0:
		return ""
	case 1:
		return ", restarted once"
	}
	return fmt.Sprintf(", restarted %d times", c.RestartCount)
}

func orUnknown(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

// lastLine is the last non-empty line of a container's termination
// message: with the FallbackToLogsOnError policy, the end of its log.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
