package memcached

import (
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/owned"
)

// A hand-off: with spec.keyMoves, a pod the rollout would replace, or
// restart empty in place (a memory limit, a maximum item size, a port,
// TLS settings: anything memcached keeps no item across), first hands
// its keys to the other slots. The rollout names the slot (scope.handOff);
// the membership's phase moves the keys to the membership without it (a
// move like a scale-down's: copied, published, settled); once that
// membership is published and the move has ended, the rollout replaces or
// restarts the pod. When the new memcached serves, its slot is in the
// membership again, and a move brings back the keys the full membership
// gives it; only once that move has ended does the next slot's hand-off
// start (handOffMayStart). Clients reach the slot's keys on the other
// slots meanwhile. A Memcached of one slot has no other to hand its keys
// to.

// costly tells whether bringing p to want's template loses memcached's
// items: a replacement or an empty restart.
func costly(p *owned.Pod, want *appsv1ac.StatefulSetApplyConfiguration) bool {
	switch owned.Costliest(owned.Changes(p, want.Spec.Template)).Cost {
	case owned.Replacement, owned.EmptyRestart:
		return true
	}
	return false
}

// handsOff tells whether the Memcached's pods hand their keys over before
// their memory goes.
func (s *scope) handsOff() bool {
	return s.movesKeys() && desired.Replicas(s.m) > 1
}

// handOffState reads the membership published, once, for host's
// hand-off: whether the rollout may name it now (handOffMayStart), and
// whether it is done (the membership published lacks host, and no move is
// under way).
func (s *scope) handOffState(ctx context.Context, host string) (may, done bool, err error) {
	current, err := s.current(ctx, configMaps)
	if err != nil || current == nil || !metav1.IsControlledBy(current, s.m) {
		return false, false, err
	}
	st := membershipOf(current, s.told())
	var others []string
	for k := range desired.Replicas(s.m) {
		if h := desired.SlotHost(s.m.Name, s.m.Namespace, int(k)); h != host {
			others = append(others, h)
		}
	}
	done = st.plan == nil && len(st.published.Nodes) > 0 && !listsSlot(st.published, host)
	return handOffMayStart(st, host, others), done, nil
}

// handOffMayStart tells whether host's hand-off may be named, with st the
// membership: it is under way or done (the membership published, or the
// one a move runs to, lacks host), or every other slot is in the
// membership published and no move runs. A slot coming back from its
// hand-off comes back in a move of its own: were the next slot's hand-off
// in the same move, each other slot would hold the returning slot's keys
// (until the move's settle removes them) beside the leaving slot's it
// takes, more than a hand-off sized for one slot's share has room for
// (bench-cache, 90,000 keys: 8,265 items evicted, 91.9% kept).
func handOffMayStart(st membershipState, host string, others []string) bool {
	switch {
	case len(st.published.Nodes) > 0 && !listsSlot(st.published, host):
		return true
	case st.plan != nil:
		return !listsSlot(st.to, host)
	}
	for _, h := range others {
		if !listsSlot(st.published, h) {
			return false
		}
	}
	return true
}

// expectedSlots is how many slots the membership is to list once every
// pod that serves is in it: all but those being handed off.
func (s *scope) expectedSlots() int {
	return int(desired.Replicas(s.m)) - len(s.leaving())
}

// leaving are the host names of the slots whose keys are being handed
// off: the one the rollout names, and each whose pod is being deleted by
// another hand (an eviction, a drain, a delete), which hands its keys off
// in its preStop hooks (package move's Leaver) while it still runs.
func (s *scope) leaving() []string {
	var out []string
	if s.handOff != "" {
		out = append(out, s.handOff)
	}
	if !s.handsOff() || !desired.HandsOffOnDeletion(s.m, s.Images) {
		return out
	}
	for _, p := range s.obs.Pods {
		k, ok := ordinal(p.Name, s.m.Name)
		if host := desired.SlotHost(s.m.Name, s.m.Namespace, int(k)); ok && p.Deleting && p.IP != "" && host != s.handOff {
			out = append(out, host)
		}
	}
	return out
}

// handingOff tells whether pod, being deleted, does its part of the copy
// step of p in its own hand-off: p moves the keys off its slot.
func (s *scope) handingOff(p move.Plan, step string, pod *owned.Pod) bool {
	if step != move.StepCopy || !pod.Deleting || pod.IP == "" || !desired.HandsOffOnDeletion(s.m, s.Images) {
		return false
	}
	to, err := discovery.Parse([]byte(p.To))
	k, ok := ordinal(pod.Name, s.m.Name)
	return err == nil && ok && !listsSlot(to, desired.SlotHost(s.m.Name, s.m.Namespace, int(k)))
}

// replanned is p, a move in its copy step, made to target instead, when
// target takes out, beside the slots p takes out, more slots that are
// being handed off: two pods deleted at once, seen one after the other.
// Each leaving pod hands its keys to the membership without every peer
// that says it is leaving too (package move's Leaver), which is target,
// not p's; published, p's membership would send the clients to a slot
// whose memory goes, and its settle would delete from the slots that stay
// the keys target gives them. Their word is of the membership p leaves,
// which target's move leaves too.
func (s *scope) replanned(ctx context.Context, p move.Plan, st membershipState, target discovery.Cluster) (move.Plan, bool) {
	if len(target.Nodes) == 0 || len(target.Nodes) >= len(st.to.Nodes) {
		return p, false
	}
	leaving := s.leaving()
	for _, n := range st.to.Nodes {
		if !slices.Contains(target.Nodes, n) && !slices.Contains(leaving, n.Host) {
			return p, false
		}
	}
	for _, n := range target.Nodes {
		if !slices.Contains(st.to.Nodes, n) {
			return p, false
		}
	}
	// A move of its own: the pods do each step of a move once.
	target.Version = max(target.Version, st.to.Version) + 1
	p.ID, p.To, p.Stepped = target.Version, string(target.Body()), s.now()
	ctrl.LoggerFrom(ctx).Info("Moving keys to fewer slots: more are handed off", "from", len(st.from.Nodes), "to", len(target.Nodes), "move", p.ID)
	return p, true
}

// listsSlot tells whether c lists the slot named host.
func listsSlot(c discovery.Cluster, host string) bool {
	return slices.ContainsFunc(c.Nodes, func(n discovery.Node) bool { return n.Host == host })
}
