package move

import (
	"context"
	"errors"
	"slices"

	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/ring"
)

// Slots leaving together: two pods deleted at once (kubectl delete of
// both, a drain with a budget of more than one, a pod evicted while the
// operator hands another slot off) each hand off to the membership they
// were last told, which lists the other: keys sent to a slot whose memory
// is going too would be lost with it. So a pod says it is leaving from the
// moment its hand-off starts (its endpoint answers "config get leaving",
// which no client asks), and one that is handing off asks its peers before
// it copies and again after: it sends no key to a peer that says it is
// leaving, and copies again, to the membership without it, the keys it
// sent to a peer that began leaving during the copy. Of two pods that start
// at once, the second to ask sees the first leaving, as each says so before
// it asks; the first copies its keys again once it sees the second. The
// operator publishes the membership without every slot being handed off
// (its leaving slots), which is the one these copies are made to.

// Leaving tells whether the pod is handing its keys off: a hand-off of
// its own (Leaver), or a move the operator asks whose membership lacks its
// slot (a scale-down, the rollout's hand-off), until a move brings its
// slot back.
func (f *Follower) Leaving() bool { return f.leaving.Load() != 0 }

// What Follower.leaving holds: not leaving (0), leaving in the move the
// operator asks, leaving for good (the pod's own hand-off).
const (
	leavingInMove  = 1
	leavingForGood = 2
)

// moveLeaves says whether the move the follower does takes its slot out,
// unless the pod is leaving for good.
func (f *Follower) moveLeaves(leaves bool) {
	v := int32(0)
	if leaves {
		v = leavingInMove
	}
	for {
		old := f.leaving.Load()
		if old == leavingForGood || f.leaving.CompareAndSwap(old, v) {
			return
		}
	}
}

// leaves tells whether the move from from to to takes this pod's slot out.
func (f *Follower) leaves(from, to discovery.Cluster) bool {
	_, in := f.self(from)
	_, stays := f.self(to)
	return in && !stays
}

// copyAway copies self's keys to the membership from without self and
// without each peer that says it is leaving, asked before the copy and
// again after it until none more is: keys copied to a peer that began
// leaving meanwhile are copied again. It returns the copies, as one
// ledger, and the ring they were made to, whose members it keeps in
// l.onto for the reports.
func (l *Leaver) copyAway(ctx context.Context, mover *Mover, from discovery.Cluster, self string) (CopyResult, *ring.Ring, error) {
	gone := map[string]bool{self: true}
	var res CopyResult
	var after *ring.Ring
	// Each round takes out one peer at least: at most one per slot.
	for {
		more := l.Follower.peersLeaving(ctx, from, gone)
		if after != nil && len(more) == 0 {
			return res, after, nil
		}
		for _, s := range more {
			gone[s] = true
		}
		to := discovery.Cluster{Version: from.Version + 1,
			Nodes: slices.DeleteFunc(slices.Clone(from.Nodes), func(n discovery.Node) bool { return gone[Server(n)] })}
		if len(to.Nodes) == 0 {
			return res, after, errors.New("every other slot is leaving too: none is left to hand the keys to")
		}
		var err error
		if after, err = ring.New(l.Ring, Servers(to)); err != nil {
			return res, after, err
		}
		l.onto = MembersDigest(to)
		mover.Dial = l.Follower.dialer(from, to)
		again, err := mover.Copy(ctx, self, after)
		res = res.then(again, gone, after)
		if err != nil {
			return res, after, err
		}
	}
}

// then is r followed by again, a copy of the same server to after, the
// ring without the servers gone: a key r copied to a server gone is as
// again copied it or, where its owner in after held it already (its copy
// through the server gone, or a client's), copied there at a CAS unknown,
// so that a settle deletes it there if it changes here.
func (r CopyResult) then(again CopyResult, gone map[string]bool, after *ring.Ring) CopyResult {
	if r.Ledger == nil {
		return again
	}
	for key, c := range r.Ledger {
		if _, ok := again.Ledger[key]; !ok && gone[c.To] {
			r.Ledger[key] = Copied{To: after.Server(key), FromCAS: c.FromCAS, Sum: c.Sum}
		}
	}
	ownCopies := len(r.Ledger)
	for key, c := range again.Ledger {
		if _, ok := r.Ledger[key]; ok {
			ownCopies--
		}
		r.Ledger[key] = c
	}
	// Of again's keys present on their owner, those r copied there are
	// not another's.
	r.Present += max(again.Present-ownCopies, 0)
	r.Copied = len(r.Ledger)
	r.Gone += again.Gone
	return r
}
