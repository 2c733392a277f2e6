package move_test

import (
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
