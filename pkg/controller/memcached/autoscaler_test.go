//go:build integration

package memcached_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/pkg/controller/memcached"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientevents "k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	cacheac "github.com/example/memcached-operator/applyconfig/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/autoscale"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/ring"
)

// evictingAutoscaler is an Autoscaler whose every Memcached has one pod,
// read as a memcached that evicts 1,000 read items between two readings
// (the test's clock moves 30 s a poll).
func evictingAutoscaler(recorder clientevents.EventRecorder) (*memcached.Autoscaler, *time.Time) {
	clock := time.Now()
	evictions := map[string]uint64{}
	return &memcached.Autoscaler{
		Client: k8s, APIReader: k8s, Recorder: recorder, Enqueue: func(types.NamespacedName) {},
		Now: func() time.Time { return clock },
		Pods: func(m *cachev1alpha1.Memcached) ([]*owned.Pod, error) {
			return []*owned.Pod{{ObjectMeta: metav1.ObjectMeta{Name: m.Name + "-0", UID: "pod"}, IP: m.Namespace + "/" + m.Name, Ready: true}}, nil
		},
		Read: func(_ context.Context, ip string, _ int64) (autoscale.Signals, error) {
			evictions[ip] += 1000
			return autoscale.Signals{Time: clock.Unix(), Uptime: clock.Unix(), Evictions: evictions[ip], LimitMaxbytes: 64 << 20, WorkingSetBytes: -1}, nil
		},
	}, &clock
}

func autoscaled(t *testing.T, ns, name string) *cachev1alpha1.Memcached {
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: cachev1alpha1.MemcachedSpec{
		KeyMoves:    &cachev1alpha1.KeyMovesSpec{Ring: string(ring.Libmemcached)},
		Autoscaling: &cachev1alpha1.AutoscalingSpec{MinSize: 1, MaxSize: 3, ScaleUpSeconds: ptr.To[int32](0)},
	}}
	// As kubectl create does: an Update, after which the creator owns
	// spec.size, which the CRD defaults.
	NewWithT(t).Expect(k8s.Create(context.Background(), m, client.FieldOwner("kubectl-create"))).To(Succeed())
	got, _ := converged(t, m)
	return got
}

// An evicting cache gets a slot through the scale subresource, as an HPA
// does, under the autoscaler's own field manager: spec.size is taken from a manager that
// wrote it once, never from one that applies it, and the status says why.
func TestTheAutoscalerStepsWithoutTakingTheSizeFromAnApplier(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	free := autoscaled(t, ns, "free")
	applied := autoscaled(t, ns, "applied")
	g.Expect(k8s.Apply(ctx, cacheac.Memcached(applied.Name, ns).WithSpec(cacheac.MemcachedSpec().WithSize(1)),
		client.FieldOwner("argocd-controller"))).To(Succeed())
	time.Sleep(time.Second) // the suite's operator's cache sees the applier's generation

	recorder := clientevents.NewFakeRecorder(10)
	a, clock := evictingAutoscaler(recorder)
	g.Eventually(func(g Gomega) {
		*clock = clock.Add(30 * time.Second)
		a.Poll(ctx)
		m := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(free), m)).To(Succeed())
		g.Expect(m.Spec.Size).To(HaveValue(BeEquivalentTo(2)))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	m := &cachev1alpha1.Memcached{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(free), m)).To(Succeed())
	owners, err := owned.OwnersOf(m.ManagedFields, fieldpath.MakePathOrDie("spec", "size"), "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owners).To(HaveLen(1))
	g.Expect(owners[0].Manager).To(Equal(memcached.AutoscalerFieldManager))
	g.Expect(owners[0].Operation).To(Equal(metav1.ManagedFieldsOperationUpdate))
	g.Expect(owners[0].Subresource).To(Equal("scale"), "as an HPA sets it")

	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(applied), m)).To(Succeed())
	g.Expect(m.Spec.Size).To(HaveValue(BeEquivalentTo(1)), "the applier's size is kept")
	st := a.Status(client.ObjectKeyFromObject(applied))
	g.Expect(st).NotTo(BeNil())
	g.Expect(*st.Next).To(Equal(autoscale.Blocked))
	g.Expect(*st.Reason).To(ContainSubstring("argocd-controller applies spec.size"))

	var notes []string
	for len(recorder.Events) > 0 {
		notes = append(notes, <-recorder.Events)
	}
	g.Expect(notes).To(ConsistOf(And(HavePrefix(corev1.EventTypeNormal+" Scaled"),
		ContainSubstring("scaled from 1 to 2 slots: 2000 evictions of read items a minute per slot, over the target of 60"),
		HaveSuffix("; spec.size taken from kubectl-create"))))
	st = a.Status(client.ObjectKeyFromObject(free))
	g.Expect(st.LastScale).To(HaveValue(HaveSuffix("taken from kubectl-create")))
	g.Expect(st.LastScaleTime).NotTo(BeNil())

	// The step under way: no reading decides anything.
	*clock = clock.Add(30 * time.Second)
	a.Poll(ctx)
	st = a.Status(client.ObjectKeyFromObject(free))
	g.Expect(*st.Next).To(Equal(autoscale.Hold))
	g.Expect(strings.HasPrefix(*st.Reason, "waiting for")).To(BeTrue(), *st.Reason)
}
