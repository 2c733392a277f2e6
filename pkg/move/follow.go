package move

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/podlog"
	"github.com/example/memcached-operator/pkg/ring"
)

// Steps of a Plan.
const (
	// StepCopy: each server of From copies its keys to their owners in To;
	// From is still the published membership.
	StepCopy = "copy"
	// StepPublished: To is the published membership; the clients take it
	// on their own clocks, and the servers wait.
	StepPublished = "published"
	// StepSettle: each server of To deletes the keys To gives another.
	StepSettle = "settle"
)

// Plan is a move of keys the operator asks of a Memcached's pods, published
// beside the membership: from the membership published before to the one
// the Memcached's new size makes, a step at a time.
type Plan struct {
	// ID is To's version: each move has its own.
	ID int64 `json:"id"`
	// Ring is the clients' hash over the slots.
	Ring ring.Hash `json:"ring"`
	// Step is what the servers are to do (StepCopy, StepPublished,
	// StepSettle).
	Step string `json:"step"`
	// From and To are memberships (discovery.Cluster's Body).
	From string `json:"from"`
	To   string `json:"to"`
	// Started is when the plan was made; Stepped when Step was last set.
	// The operator's clock: the servers do not read them.
	Started time.Time `json:"started"`
	Stepped time.Time `json:"stepped"`
}

// ParsePlan reads a Plan and its two memberships.
func ParsePlan(b []byte) (Plan, discovery.Cluster, discovery.Cluster, error) {
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return p, discovery.Cluster{}, discovery.Cluster{}, fmt.Errorf("the plan: %w", err)
	}
	from, err := discovery.Parse([]byte(p.From))
	if err != nil {
		return p, discovery.Cluster{}, discovery.Cluster{}, fmt.Errorf("the plan's from: %w", err)
	}
	to, err := discovery.Parse([]byte(p.To))
	if err != nil {
		return p, discovery.Cluster{}, discovery.Cluster{}, fmt.Errorf("the plan's to: %w", err)
	}
	return p, from, to, nil
}

// Marshal is p as the operator publishes it.
func (p Plan) Marshal() string {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // strings and times only
	}
	return string(b)
}

// Server is how a ring names node n: host:port, the port left out of the
// hash when it is memcached's (pkg/ring).
func Server(n discovery.Node) string {
	return net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port)))
}

// Servers are c's nodes as a ring names them, in slot order.
func Servers(c discovery.Cluster) []string {
	s := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		s[i] = Server(n)
	}
	return s
}

// MembersDigest names the slots of c and their addresses, in slot order,
// whatever c's version: two memberships of the same digest give every key
// the same slot, at the same address.
func MembersDigest(c discovery.Cluster) string {
	h := sha256.New()
	for _, n := range c.Nodes {
		fmt.Fprintf(h, "%s=%s\n", Server(n), n.IP)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Follower runs in each pod of a Memcached (the discovery container) and
// does its server's part of each plan the operator publishes: the copy of
// its keys, then their settling. It makes no apiserver request: it reads
// the plan from a mounted file and says what it did in its log.
type Follower struct {
	// Mover moves the keys. Its Dial is called with Local for the pod's
	// own memcached and with an ip:port for the others.
	Mover *Mover
	// PlanFile holds a Plan; missing or empty: none.
	PlanFile string
	// SealFile holds the discovery.Seal the operator gave the pod: a plan
	// is followed only where the seal vouches for it (one written to the
	// ConfigMap by another hand never is). Empty: every plan is followed.
	SealFile string
	// Host is the pod's host name: its node in a membership is the one
	// whose host name starts with it and a dot (the slot's DNS name).
	Host string
	// Local is the pod's own memcached's address.
	Local string
	// DialPeer, if set, reaches the memcached at address of the slot
	// whose DNS name is host, proving it is that slot's (the pods' own
	// certificate); nil: Mover.Dial(address). The pod's own memcached is
	// reached with Mover.Dial(Local).
	DialPeer func(ctx context.Context, address, host string) (net.Conn, error)
	// EndpointPort is the peers' discovery port, where a hand-off asks
	// them whether they are leaving.
	EndpointPort int
	// Poll is how often PlanFile is read (1 s if 0).
	Poll time.Duration
	Log  *slog.Logger

	// done are the steps done, by plan ID; ledger is the last copy's.
	done   map[int64]map[string]bool
	ledger Ledger
	// leaving: whether the pod is handing its keys off (Leaving).
	leaving atomic.Int32
}

// Run follows the plans until ctx ends.
func (f *Follower) Run(ctx context.Context) {
	poll := cmp.Or(f.Poll, time.Second)
	f.done = map[int64]map[string]bool{}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		f.step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// step does what the plan in PlanFile asks of this server, once per plan
// and step.
func (f *Follower) step(ctx context.Context) {
	p, from, to, ok := f.readPlan()
	if !ok || (p.Step != StepCopy && p.Step != StepSettle) {
		return
	}
	if f.done[p.ID] == nil {
		f.done[p.ID] = map[string]bool{}
	}
	if f.done[p.ID][p.Step] {
		return
	}
	f.done[p.ID][p.Step] = true
	report := func(r podlog.Step) {
		r.Move, r.Step = p.ID, p.Step
		level := slog.LevelInfo
		if r.Failed() {
			level = slog.LevelError
		}
		podlog.Write(f.Log, level, r)
	}
	after, err := ring.New(p.Ring, Servers(to))
	if err != nil {
		report(podlog.Step{Msg: podlog.FailedMessage, Error: err.Error()})
		return
	}
	mover := *f.Mover
	mover.Dial = f.dialer(from, to)
	if p.Step == StepCopy {
		f.moveLeaves(f.leaves(from, to))
		report(f.copyKeys(ctx, &mover, from, after))
	} else {
		report(f.settleKeys(ctx, &mover, p, to, after))
	}
}

// readPlan reads the plan of PlanFile, when there is one the seal vouches
// for.
func (f *Follower) readPlan() (Plan, discovery.Cluster, discovery.Cluster, bool) {
	b, err := os.ReadFile(f.PlanFile)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(b) == 0) {
		return Plan{}, discovery.Cluster{}, discovery.Cluster{}, false
	}
	if err != nil {
		f.Log.Error("reading the plan", "error", err.Error())
		return Plan{}, discovery.Cluster{}, discovery.Cluster{}, false
	}
	if !f.sealed(b) {
		// The kubelet writes the plan and the seal together: a plan the
		// seal does not vouch for is not the operator's, or not yet told
		// to this pod.
		f.tellOnce(slog.LevelWarn, "the plan is not sealed")
		return Plan{}, discovery.Cluster{}, discovery.Cluster{}, false
	}
	p, from, to, err := ParsePlan(b)
	if err != nil {
		f.tellOnce(slog.LevelError, "the plan does not parse", "error", err.Error())
		return Plan{}, discovery.Cluster{}, discovery.Cluster{}, false
	}
	return p, from, to, true
}

// copyKeys copies this server's keys that change slot from the membership
// from to their owners in after, and keeps the ledger for the settle.
func (f *Follower) copyKeys(ctx context.Context, mover *Mover, from discovery.Cluster, after *ring.Ring) podlog.Step {
	start := time.Now()
	self, ok := f.self(from)
	if !ok {
		// Not a server clients reach yet (a new slot): nothing to copy.
		return podlog.Step{Msg: podlog.CopiedMessage}
	}
	f.ledger = nil
	res, err := mover.Copy(ctx, self, after)
	if err != nil {
		return podlog.Step{Msg: podlog.FailedMessage, Server: self, Error: err.Error(), Copied: res.Copied}
	}
	f.ledger = res.Ledger
	return podlog.Step{Msg: podlog.CopiedMessage, Server: self, Listed: res.Listed, Leaving: res.Leaving,
		Copied: res.Copied, Present: res.Present, Gone: res.Gone, Seconds: time.Since(start).Seconds()}
}

// settleKeys removes from this server, a slot of the membership to, the
// keys that after puts elsewhere.
func (f *Follower) settleKeys(ctx context.Context, mover *Mover, p Plan, to discovery.Cluster, after *ring.Ring) podlog.Step {
	start := time.Now()
	self, ok := f.self(to)
	if !ok {
		// A leaving slot: its pod is removed next.
		return podlog.Step{Msg: podlog.SettledMessage}
	}
	ledger := f.ledger
	if !f.done[p.ID][StepCopy] {
		// Restarted since the copy: without its ledger, a key rewritten
		// here after its copy is deleted here only.
		ledger = nil
	}
	res, err := mover.Settle(ctx, self, after, ledger)
	if err != nil {
		return podlog.Step{Msg: podlog.FailedMessage, Server: self, Error: err.Error()}
	}
	return podlog.Step{Msg: podlog.SettledMessage, Server: self, Removed: res.Removed, Invalidated: res.Invalidated, Gone: res.Gone, Rewritten: res.Rewritten,
		Uncopied: res.Uncopied, Seconds: time.Since(start).Seconds()}
}

// self is this pod's server in c, as the ring names it.
func (f *Follower) self(c discovery.Cluster) (string, bool) {
	for _, n := range c.Nodes {
		if strings.HasPrefix(n.Host, f.Host+".") {
			return Server(n), true
		}
	}
	return "", false
}
