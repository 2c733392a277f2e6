package move

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/podlog"
	"github.com/example/memcached-operator/pkg/ring"
)

// A pod deleted by another hand (an eviction, a node drain, a delete with
// a grace period) hands its keys off itself, in its preStop hooks: by then
// the kubelet writes none of its volumes, so it learns no plan. It knows
// the membership it was last told (sealed), the clients' ring and its
// peers: it copies each of its keys to the slot the membership without it
// gives the key, waits until a peer's endpoint serves that membership (the
// operator publishes it once this pod said it copied), waits for the
// clients' poll, and settles (a key written here after its copy is
// invalidated on its new owner). If no peer serves it within
// PublicationWait (the operator down), the copies are taken back: the
// clients, still on the membership with this slot, would never read them,
// and a later move could bring them back over newer writes.

// HandOffStep is the Step of a hand-off's reports; their Move is the
// version of the membership the pod leaves.
const HandOffStep = "hand-off"

// Leaver hands a leaving pod's keys off.
type Leaver struct {
	// Follower is the pod's follower: its Mover, DialPeer, Host, Local,
	// EndpointPort, SealFile and Log.
	Follower *Follower
	// MembershipFile holds the membership the pod serves.
	MembershipFile string
	// Ring is the clients' hash; ClientPoll how often they poll.
	Ring       ring.Hash
	ClientPoll time.Duration
	// PublicationWait bounds the wait for a peer to serve the membership
	// without this slot, from the copy's end.
	PublicationWait time.Duration
	// Dir is the hand-off's directory; Poll how often it is looked at (1 s
	// if 0).
	Dir  string
	Poll time.Duration

	// members is the digest of the membership left, which each report
	// names (MembersDigest); onto the one of the membership its keys were
	// copied to (copyAway).
	members, onto string
}

// Run waits until both preStop hooks ask for a hand-off (the pod is being
// deleted), hands the keys off, and writes HandedOffFile, which the hooks
// wait for.
func (l *Leaver) Run(ctx context.Context) {
	poll := cmp.Or(l.Poll, time.Second)
	for {
		if leaving(l.Dir) {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(poll):
		}
	}
	l.HandOff(ctx)
	if err := os.WriteFile(filepath.Join(l.Dir, HandedOffFile), nil, 0o644); err != nil {
		l.Follower.Log.Error("cannot say the keys are handed off", "error", err.Error())
	}
}

// HandOff hands the pod's keys off, and reports each step in the log.
func (l *Leaver) HandOff(ctx context.Context) {
	f := l.Follower
	// Said before anything else: a peer leaving at the same moment sends
	// this slot no key (copyAway).
	f.leaving.Store(leavingForGood)
	from, err := l.membership()
	if err != nil {
		l.report(podlog.Step{Msg: podlog.FailedMessage, Error: err.Error()})
		return
	}
	l.members = MembersDigest(from)
	self, ok := f.self(from)
	if !ok || len(from.Nodes) < 2 {
		// Not a slot clients reach (handed off already, or leaving on a
		// scale-down), or the only one: nothing to hand off.
		l.report(podlog.Step{Msg: podlog.SettledMessage, Move: from.Version})
		return
	}
	mover := *f.Mover
	start := time.Now()
	res, after, err := l.copyAway(ctx, &mover, from, self)
	if err != nil {
		// The operator publishes the membership without this slot all the
		// same, and no settle would follow: a copy left there could be
		// older than a write a lagging client makes here.
		l.takeBack(ctx, &mover, res.Ledger, from.Version, self, err.Error())
		return
	}
	l.report(podlog.Step{Msg: podlog.CopiedMessage, Move: from.Version, Server: self, Listed: res.Listed, Leaving: res.Leaving,
		Copied: res.Copied, Present: res.Present, Gone: res.Gone, Seconds: time.Since(start).Seconds()})
	published, ok := l.awaitPublication(ctx, from, self)
	if !ok {
		l.takeBack(ctx, &mover, res.Ledger, from.Version, self,
			fmt.Sprintf("no peer served the membership without this slot within %s", l.PublicationWait))
		return
	}
	if published > from.Version+1 {
		res = l.copyAgain(ctx, &mover, res, self, after)
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(l.ClientPoll):
	}
	start = time.Now()
	settled, err := mover.Settle(ctx, self, after, res.Ledger)
	if err != nil {
		l.report(podlog.Step{Msg: podlog.FailedMessage, Move: from.Version, Server: self, Error: err.Error()})
		return
	}
	l.report(podlog.Step{Msg: podlog.SettledMessage, Move: from.Version, Server: self, Removed: settled.Removed,
		Invalidated: settled.Invalidated, Gone: settled.Gone, Rewritten: settled.Rewritten, Uncopied: settled.Uncopied, Seconds: time.Since(start).Seconds()})
}

// takeBack deletes the copies ledger records, each while it is as copied,
// and reports the hand-off failed, why.
func (l *Leaver) takeBack(ctx context.Context, mover *Mover, ledger Ledger, version int64, self, why string) {
	n, err := mover.Undo(ctx, ledger)
	msg := fmt.Sprintf("%s: %d copies taken back", why, n)
	if err != nil {
		msg += ": " + err.Error()
	}
	l.report(podlog.Step{Msg: podlog.FailedMessage, Move: version, Server: self, Error: msg})
}

// report writes r as a hand-off's step.
func (l *Leaver) report(r podlog.Step) {
	r.Step, r.Members, r.Onto = HandOffStep, l.members, l.onto
	level := slog.LevelInfo
	if r.Failed() {
		level = slog.LevelError
	}
	podlog.Write(l.Follower.Log, level, r)
}

// membership is the membership the pod was last told: the mounted one, if
// the seal vouches for it.
func (l *Leaver) membership() (discovery.Cluster, error) {
	body, err := os.ReadFile(l.MembershipFile)
	if err != nil {
		return discovery.Cluster{}, fmt.Errorf("reading the membership: %w", err)
	}
	if l.Follower.SealFile != "" {
		seal, err := discovery.ReadSeal(l.Follower.SealFile)
		if err != nil {
			return discovery.Cluster{}, fmt.Errorf("reading the seal: %w", err)
		}
		if !seal.VouchesCluster(body) {
			return discovery.Cluster{}, errors.New("the seal does not vouch for the mounted membership")
		}
	}
	return discovery.Parse(body)
}

// awaitPublication waits, within PublicationWait, until a peer of from
// serves a membership newer than from that does not list self, and
// returns its version; ok is false if none did.
func (l *Leaver) awaitPublication(ctx context.Context, from discovery.Cluster, self string) (version int64, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, l.PublicationWait)
	defer cancel()
	for {
		for _, n := range from.Nodes {
			if Server(n) == self {
				continue
			}
			if v, ok := l.serves(ctx, n, from.Version, self); ok {
				return v, true
			}
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-time.After(cmp.Or(l.Poll, time.Second)):
		}
	}
}

// serves tells whether the endpoint of n serves a membership newer than
// version that does not list self, and the version it serves.
func (l *Leaver) serves(ctx context.Context, n discovery.Node, version int64, self string) (served int64, ok bool) {
	ok = l.Follower.says(ctx, n, func(conn io.ReadWriter) (bool, error) {
		c, err := discovery.Ask(conn)
		served = c.Version
		return c.Version > version && !slices.ContainsFunc(c.Nodes, func(m discovery.Node) bool { return Server(m) == self }), err
	})
	return served, ok
}

// copyAgain copies self's keys to after once more, its copies so far res,
// once a membership is published that is not the next after the one this
// pod left: another move ran between them (a slot handed off just before
// this pod was told of it), and its settle, on the slots that stay, deleted
// the copies this pod had made there of keys its membership gave another
// slot. A key still there, as copied or written since by a client of the
// membership published, is kept; a failure leaves the copies as they are,
// since the clients already read where they were made.
func (l *Leaver) copyAgain(ctx context.Context, mover *Mover, res CopyResult, self string, after *ring.Ring) CopyResult {
	again, err := mover.Copy(ctx, self, after)
	if err != nil {
		l.Follower.Log.Error("copying the keys again", "error", err.Error())
	}
	l.Follower.Log.Info("copied the keys again: a move ran since the membership left", "copied", again.Copied, "present", again.Present)
	return res.then(again, nil, after)
}
