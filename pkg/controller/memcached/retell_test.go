package memcached

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

// A pod a step of a move still waits for is told of it again 5 s after
// the step began, then at 15, 35 s...: each a change of the pod, at which
// the kubelet writes its volumes anew. A pod that said its word is not;
// nor is one already told of this re-telling.
func TestAPodAStepWaitsForIsToldAgain(t *testing.T) {
	g := NewWithT(t)
	st, to, copied := copyOfTwoSlots(t)
	started := st.plan.Started
	pods := []*owned.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "c-0", Namespace: "ns"}, IP: "10.0.0.1"},
		{ObjectMeta: metav1.ObjectMeta{Name: "c-1", Namespace: "ns"}, IP: "10.0.0.2"},
	}
	retold := func(after time.Duration, p *owned.Pod) map[string]string {
		t.Helper()
		s := &scope{
			Reconciler: &Reconciler{Logs: logsOf{"c-0": copied}, Recorder: events.NewFakeRecorder(10), Now: func() time.Time { return started.Add(after) }},
			m:          &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}},
		}
		s.obs.Pods = pods
		_, _, _, err := s.moveStep(context.Background(), st, to, nil)
		g.Expect(err).NotTo(HaveOccurred())
		return s.retell(p)
	}

	g.Expect(retold(4*time.Second, pods[1])).To(BeEmpty(), "not before 5 s")
	g.Expect(retold(6*time.Second, pods[1])).To(Equal(map[string]string{desired.AnnotationMembershipRetold: "4 copy 1"}))
	g.Expect(retold(6*time.Second, pods[0])).To(BeEmpty(), "c-0 said its word")
	pods[1].MembershipRetold = "4 copy 1"
	g.Expect(retold(14*time.Second, pods[1])).To(BeEmpty(), "told of it again already")
	g.Expect(retold(16*time.Second, pods[1])).To(Equal(map[string]string{desired.AnnotationMembershipRetold: "4 copy 2"}))
	g.Expect(retold(36*time.Second, pods[1])).To(Equal(map[string]string{desired.AnnotationMembershipRetold: "4 copy 3"}))
	g.Expect(retold(moveStepBound, pods[1])).To(BeEmpty(), "the step waits no longer")
}
