package memcached

import (
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
)

// wholeMembershipWait is how long after its creation a Memcached's first
// membership waits for every slot to have a ready pod before the slots
// that have one are published.
const wholeMembershipWait = 30 * time.Second

// firstMembership is the membership to publish for a new Memcached, which
// has published none (st), while some of its slots have no ready pod
// (target lists those that have). It is published whole, once every slot
// has a ready pod, so that no key moves; but a slot late past
// wholeMembershipWait (a pod that cannot be scheduled, or crashes) keeps
// the others from no client, which find no server until a membership is
// published: those with a ready pod are published then, and the late slot
// joins them with a move.
func (s *scope) firstMembership(st membershipState, target discovery.Cluster) (discovery.Cluster, string, ctrl.Result, error) {
	m := s.m
	wait := wholeMembershipWait - s.now().Sub(m.CreationTimestamp.Time)
	if len(target.Nodes) > 0 && wait <= 0 {
		return target, "", ctrl.Result{}, nil
	}
	none := discovery.Cluster{Version: max(st.published.Version, 1)}
	s.obs.Unpublished = fmt.Sprintf("No membership is published yet, so clients find no server: %d of %d slots have a ready pod; it is published once all have", len(target.Nodes), desired.Replicas(m))
	if len(target.Nodes) == 0 {
		// A pod's readiness is an event.
		return none, "", ctrl.Result{}, nil
	}
	s.obs.Unpublished += fmt.Sprintf(", or in %s with those", wait.Round(time.Second))
	return none, "", ctrl.Result{RequeueAfter: wait}, nil
}
