package memcached

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/podlog"
)

// awaitPods reads what the pods of c said of step of the move p, whose
// success says msg, and tells whether the step is done: every pod said
// so, or moveStepBound passed since the step began. A step done with a
// pod silent or failed is told in a Warning event, incomplete (a format
// of what is missing).
func (s *scope) awaitPods(ctx context.Context, p move.Plan, step string, c discovery.Cluster, msg, incomplete string) (stepReports, bool, error) {
	said, err := s.readStepReports(ctx, p, step, c, msg)
	if err != nil {
		return said, false, err
	}
	if !said.all() && s.now().Sub(p.Stepped) < moveStepBound {
		s.await(p, step, said.waiting)
		return said, false, nil
	}
	if !said.all() || len(said.failed) > 0 {
		s.Recorder.Eventf(s.m, nil, corev1.EventTypeWarning, eventKeyMoveIncomplete, "Move", incomplete, said.missing(moveStepBound))
		keyMoveStepsIncomplete.WithLabelValues(s.m.Namespace, s.m.Name, step).Inc()
	}
	return said, true, nil
}

// stepReports is what the pods of a membership said of a step of a plan.
type stepReports struct {
	// waiting are the pods that said nothing yet; failed those that said
	// they failed, with what.
	waiting []string
	failed  []string
	// copied and removed are the keys the pods said they copied, removed;
	// seconds the longest any took; done the pods that said so.
	copied, removed int
	seconds         float64
	done            []string
}

func (w stepReports) all() bool { return len(w.waiting) == 0 }

func (w stepReports) missing(bound time.Duration) string {
	var parts []string
	if len(w.waiting) > 0 {
		parts = append(parts, fmt.Sprintf("no word in %s from %s", bound, strings.Join(w.waiting, ", ")))
	}
	if len(w.failed) > 0 {
		parts = append(parts, "failed: "+strings.Join(w.failed, "; "))
	}
	return strings.Join(parts, "; ")
}

// of is what the pod name said, or why it said nothing, when it did not
// say it was done.
func (w stepReports) of(name string, bound time.Duration) string {
	for _, f := range w.failed {
		if f == name+" is not running" || strings.HasPrefix(f, name+": ") {
			return f
		}
	}
	return fmt.Sprintf("no word in %s from %s", bound, name)
}

// readStepReports reads what the discovery container of each pod of c said of
// step of the move p, whose success says msg. A pod that is gone, or not
// running, has nothing to say: it is not waited for.
func (s *scope) readStepReports(ctx context.Context, p move.Plan, step string, c discovery.Cluster, msg string) (stepReports, error) {
	var w stepReports
	pods := map[string]*owned.Pod{}
	for _, pod := range s.obs.Pods {
		pods[pod.Name] = pod
	}
	limit := int64(podlog.ReadLimit)
	// The follower's lines name the move: this only bounds what is read
	// (the node's clock may be behind the operator's).
	since := metav1.NewTime(p.Started.Add(-time.Minute))
	// A leaving pod's copy counts when made onto the members p moves to.
	onto := ""
	if to, err := discovery.Parse([]byte(p.To)); err == nil && len(to.Nodes) > 0 {
		onto = move.MembersDigest(to)
	}
	for _, n := range c.Nodes {
		pod := pods[podOf(n)]
		handingOff := pod != nil && s.handingOff(p, step, pod)
		if pod == nil || (pod.Deleting && !handingOff) || pod.IP == "" {
			w.failed = append(w.failed, podOf(n)+" is not running")
			continue
		}
		log, err := s.Logs.Read(ctx, pod.Namespace, pod.Name, &corev1.PodLogOptions{
			Container: desired.DiscoveryContainerName, LimitBytes: &limit, SinceTime: &since,
		})
		if err != nil {
			return w, fmt.Errorf("reading the log of pod %s's discovery container: %w", pod.Name, err)
		}
		said, ok := podlog.LastStep(log, p.ID, step, msg)
		if handingOff {
			// Its hand-off's copy, of the keys of the membership it left:
			// c, or an older version of c's members, where its mounted
			// membership lagged; or made onto p's members, where it was
			// deleted before it was told of c.
			said, ok = podlog.LastHandOff(log, c.Version, move.MembersDigest(c), onto, move.HandOffStep, msg)
		}
		switch {
		case !ok:
			w.waiting = append(w.waiting, pod.Name)
		case said.Failed():
			w.failed = append(w.failed, pod.Name+": "+said.Error)
		default:
			w.copied += said.Copied
			w.removed += said.Removed + said.Invalidated + said.Uncopied
			w.seconds = max(w.seconds, said.Seconds)
			w.done = append(w.done, pod.Name)
		}
	}
	return w, nil
}

// movingMessage says where the move p stands, for the status.
func movingMessage(p move.Plan, from, to discovery.Cluster) string {
	what := map[string]string{
		move.StepCopy:      "the pods copy the keys that change slot to their new slots; the membership is published after",
		move.StepPublished: "the new membership is published; the keys stay on their old slots until the clients have polled it",
		move.StepSettle:    "the pods remove the keys that moved from their old slots",
	}[p.Step]
	return fmt.Sprintf("Moving keys from %d to %d slots: %s", len(from.Nodes), len(to.Nodes), what)
}
