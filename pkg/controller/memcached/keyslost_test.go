package memcached

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/owned"
)

// A slot the clients' membership lists whose address changes in the next
// one lost its pod's keys (its pod went without leaving the membership
// first, as a hand-off does): one Warning event says so, once, naming the
// pod and both addresses, and the alert's counter counts it. A slot that
// leaves the membership, or comes back to it after handing its keys off,
// or keeps its address, is no loss.
func TestASlotReplacedWithoutAHandOffIsToldToHaveLostItsKeys(t *testing.T) {
	g := NewWithT(t)
	node := func(k int, ip string) discovery.Node {
		return discovery.Node{Host: desired.SlotHost("c", "ns", k), IP: ip, Port: 11211}
	}
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{Recorder: recorder}
	s := &scope{Reconciler: r, m: &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](4), KeyMoves: &cachev1alpha1.KeyMovesSpec{}}}}
	for k, ip := range []string{"10.0.0.1", "10.0.0.7", "10.0.0.3", "10.0.0.8"} {
		s.obs.Pods = append(s.obs.Pods, &owned.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-" + string(rune('0'+k)), Namespace: "ns"}, IP: ip, Ready: true})
	}
	// Slot 1's pod is new at another address; slot 2 leaves (its hand-off);
	// slot 3 comes back after its hand-off, at a new address.
	published := discovery.Cluster{Version: 5, Nodes: []discovery.Node{node(0, "10.0.0.1"), node(1, "10.0.0.2"), node(2, "10.0.0.3")}}
	next := discovery.Cluster{Version: 6, Nodes: []discovery.Node{node(0, "10.0.0.1"), node(1, "10.0.0.7"), node(3, "10.0.0.8")}}
	s.tellKeysLost(published, next)
	g.Expect(recorder.Events).To(HaveLen(1))
	g.Expect(<-recorder.Events).To(And(HavePrefix("Warning KeysLost "), ContainSubstring("Pod c-1 was replaced without handing its keys off"),
		ContainSubstring("at 10.0.0.2 are lost; its new pod at 10.0.0.7 serves empty")))

	lost := slotKeysLost.WithLabelValues("ns", "c")
	g.Expect(counted(t, lost)).To(Equal(1.0), "the alert's counter")
	s.tellKeysLost(published, next)
	g.Expect(recorder.Events).To(BeEmpty(), "told once")
	g.Expect(counted(t, lost)).To(Equal(1.0), "counted once")

	r.forgetKeysLost(types.NamespacedName{Namespace: "ns", Name: "c"})
	s.tellKeysLost(published, next)
	g.Expect(recorder.Events).To(HaveLen(1), "a Memcached made anew under the name is told anew")
}

func counted(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := c.Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A slot being handed off whose pod ends the copy step without saying it
// copied its keys (here deleted with no grace period: gone before its
// copy) lost them: one Warning event says so, once, naming the pod, why
// and its address, and the alert's counter counts it. A slot that leaves
// with its pod's word, or leaves by a scale-down, is no such loss.
func TestAHandOffEndedWithoutTheLeavingPodsWordIsToldToHaveLostItsKeys(t *testing.T) {
	g := NewWithT(t)
	node := func(k int, ip string) discovery.Node {
		return discovery.Node{Host: desired.SlotHost("h", "ns", k), IP: ip, Port: 11211}
	}
	recorder := events.NewFakeRecorder(10)
	s := &scope{Reconciler: &Reconciler{Recorder: recorder}, m: &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: "ns"},
		Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](4), KeyMoves: &cachev1alpha1.KeyMovesSpec{}}}}
	pod := func(name string, deleting bool) *owned.Pod {
		return &owned.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, IP: "10.0.0.9", Ready: true, Deleting: deleting}
	}
	// h-1 is gone; h-2 is being deleted and said it copied; h-3 leaves by a
	// scale-down and said nothing.
	s.obs.Pods = []*owned.Pod{pod("h-0", false), pod("h-2", true), pod("h-3", false)}
	from := discovery.Cluster{Version: 5, Nodes: []discovery.Node{node(0, "10.0.0.1"), node(1, "10.0.0.2"), node(2, "10.0.0.3"), node(3, "10.0.0.4")}}
	to := discovery.Cluster{Version: 6, Nodes: []discovery.Node{node(0, "10.0.0.1")}}
	said := stepReports{failed: []string{"h-1 is not running"}, waiting: []string{"h-3"}, done: []string{"h-0", "h-2"}}
	lost := slotKeysLost.WithLabelValues("ns", "h")
	s.tellHandOffsLost(from, to, said)
	g.Expect(recorder.Events).To(HaveLen(1))
	g.Expect(<-recorder.Events).To(And(HavePrefix("Warning KeysLost "),
		ContainSubstring("Pod h-1 went before it handed its keys off (h-1 is not running): the keys its slot held at 10.0.0.2 are lost")))
	g.Expect(counted(t, lost)).To(Equal(1.0), "the alert's counter")
	s.tellHandOffsLost(from, to, said)
	g.Expect(recorder.Events).To(BeEmpty(), "told once")

	// The slot the rollout hands off, silent past the bound.
	s.handOff = node(3, "").Host
	s.tellHandOffsLost(from, to, said)
	g.Expect(recorder.Events).To(HaveLen(1))
	g.Expect(<-recorder.Events).To(ContainSubstring("Pod h-3 went before it handed its keys off (no word in 5m0s from h-3)"))
	g.Expect(counted(t, lost)).To(Equal(2.0))
}
