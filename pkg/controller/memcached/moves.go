package memcached

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/podlog"
	"github.com/example/memcached-operator/pkg/ring"
)

// With spec.keyMoves, a change of the slots the membership lists is a move
// of keys (package move), which the operator runs a step at a time through
// the membership ConfigMap: beside the membership it publishes the plan
// (desired.MoveKey), which every pod's discovery container follows, and it
// reads what each did from that container's log (pods/log, one request
// per pod every moveLogPoll while a step waits for them; none at rest):
//
//  1. The new slots' pods start, and the membership stays as it was until
//     every slot of the spec has a ready pod.
//  2. copy: each pod of the published membership copies the keys the new
//     membership gives another slot there. The membership stays as it was.
//  3. published: once every such pod said it copied, or moveStepBound
//     passed (an event says which did not), the new membership is
//     published; the clients take it within clientPollSeconds.
//  4. settle: then each pod of the new membership deletes the keys it
//     holds that belong elsewhere.
//  5. The plan is removed; the pods of slots the membership no longer
//     lists are removed only now (the StatefulSet keeps them until then:
//     scope.slots).

// Event reasons of a move.
const (
	eventMovingKeys        = "MovingKeys"
	eventKeysMoved         = "KeysMoved"
	eventKeyMoveIncomplete = "KeyMoveIncomplete"
)

const (
	// moveLogPoll is how often the pods' logs are read while a step waits
	// for them.
	moveLogPoll = 2 * time.Second
	// moveStepBound bounds how long a copy or a settle waits for the pods:
	// at the followers' cap of 20,000 keys a second, which binds now that
	// a copy over TLS batches its values, some 6 million keys a pod.
	moveStepBound = 5 * time.Minute
)

// movesKeys tells whether the Memcached's pods move keys.
func (s *scope) movesKeys() bool {
	return desired.MovesKeys(s.m) && desired.RunsDiscovery(s.m, s.Images)
}

// membershipState is what the membership ConfigMap holds: the published
// membership and the move under way, if any.
type membershipState struct {
	published discovery.Cluster
	plan      *move.Plan
	from, to  discovery.Cluster
}

// membershipOf reads current, the membership ConfigMap as the store holds
// it (nil when none), as far as what the operator is known to have
// published (told) vouches for it: anyone with ConfigMap rights can write
// to it, and what the operator did not publish moves no key and sizes
// nothing. A membership no seal vouches for (one an operator before seals
// wrote, or another hand) is as if absent but for its version, which is
// the highest the operator told: the next one, made from the pods, counts
// on from it, as clients that take only a newer membership need. A plan
// no seal vouches for is as if absent; so is what does not parse (edited
// by hand).
func membershipOf(current *owned.Summary, told publications) membershipState {
	var st membershipState
	if current == nil {
		return st
	}
	cluster, plan := []byte(current.Membership), []byte(current.Move)
	vouched := func(ok func(discovery.Seal) bool) bool { return slices.ContainsFunc(told.seals, ok) }
	if !vouched(func(s discovery.Seal) bool { return s.VouchesCluster(cluster) }) {
		st.published.Version = told.version
		return st
	}
	st.published, _ = discovery.Parse(cluster)
	if current.Move != "" && vouched(func(s discovery.Seal) bool { return s.VouchesCluster(cluster) && s.VouchesPlan(plan) }) {
		if p, from, to, err := move.ParsePlan(plan); err == nil {
			st.plan, st.from, st.to = &p, from, to
		}
	}
	return st
}

// publications is what the operator is known to have published of a
// Memcached's membership: the seals of its last publication and of what
// its pods were told, and the highest version among them.
type publications struct {
	seals   []discovery.Seal
	version int64
}

// told is what the operator is known to have published: what it last
// published, and what its pods carry (after a restart of the operator, or
// before its watch shows its last apply; an operator before seals set the
// version alone). Pods are written by the operator, and by whoever could
// run anything in them.
func (s *scope) told() publications {
	var out publications
	if v, ok := s.publishedSeals.Load(client.ObjectKeyFromObject(s.m)); ok && v.(publishedSeal).uid == s.m.UID {
		out.seals = append(out.seals, v.(publishedSeal).seal)
		out.version = v.(publishedSeal).version
	}
	for _, p := range s.obs.Pods {
		if seal, err := discovery.ParseSeal(p.MembershipSeal); err == nil {
			out.seals = append(out.seals, seal)
		}
		// "7", or "7 (move 8: copy)" (reconcileMembership).
		version, _, _ := strings.Cut(p.MembershipVersion, " ")
		if v, err := strconv.ParseInt(version, 10, 64); err == nil {
			out.version = max(out.version, v)
		}
	}
	return out
}

// publishedSeal is the last membership the operator published for the
// Memcached of UID uid: its seal and version.
type publishedSeal struct {
	uid     types.UID
	seal    discovery.Seal
	version int64
}

// slots is how many pods the StatefulSet runs: the spec's size, and while
// keys move, every slot the membership lists or a move moves from, so that
// a leaving slot's pod serves until the clients have left it; never more
// than the CRD lets a size be.
func (s *scope) slots(ctx context.Context) int32 {
	want := desired.Replicas(s.m)
	if !s.movesKeys() {
		return want
	}
	current, err := s.current(ctx, configMaps)
	if err != nil || current == nil || !metav1.IsControlledBy(current, s.m) {
		return want
	}
	return slotsOf(s.m.Name, want, membershipOf(current, s.told()))
}

// slotsOf is how many pods the StatefulSet of the Memcached name runs
// while st is its membership: want (its size), or more while slots st
// lists or moves from are past it; never more than MaxSize.
func slotsOf(name string, want int32, st membershipState) int32 {
	for _, c := range []discovery.Cluster{st.published, st.from, st.to} {
		for _, node := range c.Nodes {
			if k, ok := ordinal(podOf(node), name); ok && k+1 > want && k < cachev1alpha1.MaxSize {
				want = k + 1
			}
		}
	}
	return want
}

// podOf is the name of the pod of node's slot: its host name's first label.
func podOf(node discovery.Node) string {
	name, _, _ := strings.Cut(node.Host, ".")
	return name
}

// held is c with each node's address and port those of its slot's ready
// pod, if it has one, and its version one more when that changed anything.
func held(c discovery.Cluster, addrs map[string]desired.PodAddress) discovery.Cluster {
	out := discovery.Cluster{Version: c.Version}
	changed := false
	for _, n := range c.Nodes {
		if a := addrs[podOf(n)]; a.IP != "" && (a.IP != n.IP || (a.Port != 0 && a.Port != n.Port)) {
			n.IP, n.Port, changed = a.IP, cmp.Or(a.Port, n.Port), true
		}
		out.Nodes = append(out.Nodes, n)
	}
	if changed {
		out.Version++
	}
	return out
}

// sameHosts tells whether a and b list the same slots.
func sameHosts(a, b discovery.Cluster) bool {
	if len(a.Nodes) != len(b.Nodes) {
		return false
	}
	for i := range a.Nodes {
		if a.Nodes[i].Host != b.Nodes[i].Host {
			return false
		}
	}
	return true
}

// moveStep takes one step of moving keys, from st: it returns the
// membership to publish, the plan to publish beside it ("" for none), and
// when to look again.
func (s *scope) moveStep(ctx context.Context, st membershipState, target discovery.Cluster, addrs map[string]desired.PodAddress) (discovery.Cluster, string, ctrl.Result, error) {
	now := s.now()
	m := s.m
	if st.plan == nil {
		return s.startMove(ctx, st, target, addrs)
	}
	p := *st.plan
	switch p.Step {
	case move.StepCopy:
		if next, ok := s.replanned(ctx, p, st, target); ok {
			return held(st.published, addrs), next.Marshal(), ctrl.Result{RequeueAfter: moveLogPoll}, nil
		}
		said, done, err := s.awaitPods(ctx, p, move.StepCopy, st.from, podlog.CopiedMessage,
			fmt.Sprintf("Publishing %d slots with keys not all copied (%%s): their clients miss them", len(st.to.Nodes)))
		if err != nil || !done {
			return held(st.published, addrs), p.Marshal(), ctrl.Result{RequeueAfter: moveLogPoll}, err
		}
		s.tellHandOffsLost(st.from, st.to, said)
		p.Step, p.Stepped = move.StepPublished, now
		to := st.to
		if to.Version <= st.published.Version {
			to.Version = st.published.Version + 1
		}
		return held(to, addrs), p.Marshal(), ctrl.Result{RequeueAfter: desired.ClientPoll(m)}, nil
	case move.StepPublished:
		if wait := desired.ClientPoll(m) - now.Sub(p.Stepped); wait > 0 {
			return held(st.published, addrs), p.Marshal(), ctrl.Result{RequeueAfter: wait}, nil
		}
		p.Step, p.Stepped = move.StepSettle, now
		return held(st.published, addrs), p.Marshal(), ctrl.Result{RequeueAfter: moveLogPoll}, nil
	default: // move.StepSettle
		said, done, err := s.awaitPods(ctx, p, move.StepSettle, st.to, podlog.SettledMessage,
			"Keys that moved may stay on their old slots (%s): a later change of the slots can serve them")
		if err != nil || !done {
			return held(st.published, addrs), p.Marshal(), ctrl.Result{RequeueAfter: moveLogPoll}, err
		}
		s.recordMoved(ctx, st, p, said)
		return held(st.published, addrs), "", ctrl.Result{}, nil
	}
}

// startMove is the membership to publish, and the plan of a move of keys
// to start, when the membership published (st) differs from target: the
// plan is empty where no key needs to move.
func (s *scope) startMove(ctx context.Context, st membershipState, target discovery.Cluster, addrs map[string]desired.PodAddress) (discovery.Cluster, string, ctrl.Result, error) {
	m, now := s.m, s.now()
	switch {
	case st.published.Version > 0 && sameHosts(target, st.published):
		return target, "", ctrl.Result{}, nil
	case len(target.Nodes) < s.expectedSlots() && len(st.published.Nodes) == 0:
		return s.firstMembership(st, target)
	case len(target.Nodes) < s.expectedSlots():
		// A slot of the spec has no ready pod yet: its readiness is an
		// event.
		return held(st.published, addrs), "", ctrl.Result{}, nil
	case len(st.published.Nodes) == 0 || len(target.Nodes) == 0:
		// No server holds keys clients could find, or none is left to
		// hold them.
		return target, "", ctrl.Result{}, nil
	}
	p := move.Plan{
		ID: target.Version, Ring: ring.Hash(m.Spec.KeyMoves.Ring), Step: move.StepCopy,
		From: string(st.published.Body()), To: string(target.Body()),
		Started: now, Stepped: now,
	}
	ctrl.LoggerFrom(ctx).Info("Moving keys", "from", len(st.published.Nodes), "to", len(target.Nodes), "move", p.ID)
	s.Recorder.Eventf(m, nil, corev1.EventTypeNormal, eventMovingKeys, "Move",
		"Moving keys from %d to %d slots: each pod copies the keys the new membership gives another slot before it is published", len(st.published.Nodes), len(target.Nodes))
	return held(st.published, addrs), p.Marshal(), ctrl.Result{RequeueAfter: moveLogPoll}, nil
}

// recordMoved tells of the move p that ended, whose settle the pods
// reported (said), in the log and in a KeysMoved event.
func (s *scope) recordMoved(ctx context.Context, st membershipState, p move.Plan, said stepReports) {
	copied, _ := s.readStepReports(ctx, p, move.StepCopy, st.from, podlog.CopiedMessage)
	ctrl.LoggerFrom(ctx).Info("Moved keys", "from", len(st.from.Nodes), "to", len(st.to.Nodes), "move", p.ID, "copied", copied.copied, "removed", said.removed)
	s.Recorder.Eventf(s.m, nil, corev1.EventTypeNormal, eventKeysMoved, "Move",
		"Moved keys from %d to %d slots in %s: %d copied to their new slots (the longest copy of a pod took %.2fs), %d removed from their old ones",
		len(st.from.Nodes), len(st.to.Nodes), s.now().Sub(p.Started).Round(time.Second), copied.copied, copied.seconds, said.removed)
}
