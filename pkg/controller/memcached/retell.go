package memcached

import (
	"fmt"
	"time"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/owned"
)

// A pod told of a step of a move may mount the new seal beside the old
// plan: the kubelet wrote the pod's volumes, at the telling, from its own
// watch of the membership ConfigMap, which on a loaded node may lag more
// than kubeletCatchUp; and it writes them again only at its periodic sync
// of the pod, a minute or more later. Until then the pod follows no plan
// (its seal does not vouch for the one it mounts) and says no word, and
// the step waits for it: a drain's leaving pod, whose hand-off waits 60 s
// for the membership without its slot, took its copies back meanwhile,
// and its slot's keys were lost (seen on the real node, 76 s into such a
// step). So a pod a step still waits for is told of it again, retellFirst
// after the step began and then at doubling intervals (5, 15, 35, 75 s,
// ...): a change of the pod, at which the kubelet writes its volumes anew
// from a watch that has caught up. A pod whose word comes is not told
// again; at rest, no pod is.

// retellFirst is how long after a step began the pods it still waits for
// are told of it again, the first time.
const retellFirst = 5 * time.Second

// retellings is how many times, elapsed after a step began, the pods it
// still waits for are to have been told of it again.
func retellings(elapsed time.Duration) int {
	n := 0
	for next := retellFirst; elapsed >= next; next = 2*next + retellFirst {
		n++
	}
	return n
}

// await records that step of the move p waits for the word of the pods
// named waiting, for tellPods (retell).
func (s *scope) await(p move.Plan, step string, waiting []string) {
	n := retellings(s.now().Sub(p.Stepped))
	if n == 0 {
		return
	}
	s.awaited = map[string]bool{}
	for _, name := range waiting {
		s.awaited[name] = true
	}
	s.retold = fmt.Sprintf("%d %s %d", p.ID, step, n)
}

// retell is what to tell p again, told of the membership already: the
// step that waits for its word, when it is due.
func (s *scope) retell(p *owned.Pod) map[string]string {
	if !s.awaited[p.Name] || p.MembershipRetold == s.retold {
		return nil
	}
	return map[string]string{desired.AnnotationMembershipRetold: s.retold}
}
