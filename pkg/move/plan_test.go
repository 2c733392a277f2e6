package move_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/ring"
)

// A plan reads back as the operator published it, with its two
// memberships: the operator writes it with Marshal and the pods read it
// with ParsePlan.
func TestAPlanReadsBackAsPublished(t *testing.T) {
	g := NewWithT(t)
	from := discovery.Cluster{Version: 3, Nodes: []discovery.Node{{Host: "c-0.c.ns.svc", IP: "10.0.0.1", Port: 11211}}}
	to := discovery.Cluster{Version: 4, Nodes: append(from.Nodes, discovery.Node{Host: "c-1.c.ns.svc", IP: "10.0.0.2", Port: 11211})}
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	want := move.Plan{ID: 4, Ring: ring.Libmemcached, Step: move.StepCopy, From: string(from.Body()), To: string(to.Body()), Started: at, Stepped: at.Add(time.Second)}
	got, gotFrom, gotTo, err := move.ParsePlan([]byte(want.Marshal()))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))
	g.Expect(gotFrom).To(Equal(from))
	g.Expect(gotTo).To(Equal(to))
	_, _, _, err = move.ParsePlan([]byte(`{"id":4,"from":"not a membership"}`))
	g.Expect(err).To(MatchError(ContainSubstring("from")))
}

// Two memberships of the same slots at the same addresses have one
// digest, whatever their versions; another address or another slot gives
// another.
func TestTheMembersDigestNamesSlotsAndAddresses(t *testing.T) {
	node := func(k int, ip string) discovery.Node {
		return discovery.Node{Host: fmt.Sprintf("c-%d.c.ns.svc", k), IP: ip, Port: 11211}
	}
	a := discovery.Cluster{Version: 3, Nodes: []discovery.Node{node(0, "10.0.0.1"), node(1, "10.0.0.2")}}
	same := discovery.Cluster{Version: 9, Nodes: []discovery.Node{node(0, "10.0.0.1"), node(1, "10.0.0.2")}}
	moved := discovery.Cluster{Version: 9, Nodes: []discovery.Node{node(0, "10.0.0.1"), node(1, "10.0.0.5")}}
	grown := discovery.Cluster{Version: 9, Nodes: []discovery.Node{node(0, "10.0.0.1"), node(1, "10.0.0.2"), node(2, "10.0.0.3")}}
	if move.MembersDigest(a) != move.MembersDigest(same) {
		t.Errorf("versions 3 and 9 of the same members differ")
	}
	for _, other := range []discovery.Cluster{moved, grown} {
		if move.MembersDigest(a) == move.MembersDigest(other) {
			t.Errorf("%v and %v have one digest", a.Nodes, other.Nodes)
		}
	}
}
