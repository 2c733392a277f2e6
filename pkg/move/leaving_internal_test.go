package move

import (
	"testing"

	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/ring"
)

// TestAPodSaysItIsLeavingWhileItsSlotIsOut: a move the operator asks that
// takes the pod's slot out has it say it is leaving, and one that brings
// the slot back has it stop; its own hand-off (the pod deleted) has it say
// so for good, whatever move follows.
func TestAPodSaysItIsLeavingWhileItsSlotIsOut(t *testing.T) {
	both := discovery.Cluster{Version: 1, Nodes: []discovery.Node{{Host: "c-0.c.ns.svc", IP: "10.0.0.1", Port: 11211}, {Host: "c-1.c.ns.svc", IP: "10.0.0.2", Port: 11211}}}
	other := discovery.Cluster{Version: 2, Nodes: both.Nodes[:1]}
	f := &Follower{Host: "c-1"}
	steps := []struct {
		from, to discovery.Cluster
		want     bool
	}{{both, other, true}, {other, both, false}, {both, both, false}}
	for i, s := range steps {
		f.moveLeaves(f.leaves(s.from, s.to))
		if f.Leaving() != s.want {
			t.Errorf("after move %d: leaving %v, want %v", i, f.Leaving(), s.want)
		}
	}
	f.leaving.Store(leavingForGood)
	f.moveLeaves(f.leaves(other, both))
	if !f.Leaving() {
		t.Error("a move that lists the slot ended the pod's own hand-off")
	}
}

// TestACopyAgainRedirectsTheLedger: keys first copied to a server that
// began leaving are, in the ledger, where the second copy put them, or,
// where their new owner held them already (the leaving server passed them
// on), there at a CAS unknown (0: a settle deletes them there if they
// change here); keys copied where they stay are kept as they were, and
// counted once.
func TestACopyAgainRedirectsTheLedger(t *testing.T) {
	after, err := ring.New(ring.Libmemcached, []string{"a:11211"})
	if err != nil {
		t.Fatal(err)
	}
	first := CopyResult{Listed: 5, Leaving: 4, Copied: 4, Present: 1, Gone: 1, Ledger: Ledger{
		"stays":     {To: "a:11211", FromCAS: 1, ToCAS: 11, Sum: 100},
		"recopied":  {To: "b:11211", FromCAS: 2, ToCAS: 12, Sum: 200},
		"passed-on": {To: "b:11211", FromCAS: 3, ToCAS: 13, Sum: 300},
		"other":     {To: "b:11211", FromCAS: 4, ToCAS: 14, Sum: 400},
	}}
	// The second copy finds "stays" and "passed-on" on a, copies
	// "recopied" and "other" there, and one more key a client had set on a.
	again := CopyResult{Listed: 5, Leaving: 5, Copied: 2, Present: 3, Gone: 1, Ledger: Ledger{
		"recopied": {To: "a:11211", FromCAS: 2, ToCAS: 22, Sum: 200},
		"other":    {To: "a:11211", FromCAS: 4, ToCAS: 24, Sum: 400},
	}}
	got := first.then(again, map[string]bool{"b:11211": true, "self:11211": true}, after)
	want := Ledger{
		"stays":     {To: "a:11211", FromCAS: 1, ToCAS: 11, Sum: 100},
		"recopied":  {To: "a:11211", FromCAS: 2, ToCAS: 22, Sum: 200},
		"passed-on": {To: "a:11211", FromCAS: 3, Sum: 300},
		"other":     {To: "a:11211", FromCAS: 4, ToCAS: 24, Sum: 400},
	}
	for k, c := range want {
		if got.Ledger[k] != c {
			t.Errorf("%s: %+v, want %+v", k, got.Ledger[k], c)
		}
	}
	if len(got.Ledger) != len(want) || got.Copied != 4 || got.Present != 2 || got.Gone != 2 || got.Listed != 5 || got.Leaving != 4 {
		t.Errorf("counts: %+v", got)
	}
	if fresh := (CopyResult{}).then(again, nil, after); fresh.Copied != 2 || fresh.Present != 3 {
		t.Errorf("a first copy: %+v", fresh)
	}
}
