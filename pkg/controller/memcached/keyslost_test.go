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
