package memcached

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

// tellPods sends the re-telling in a patch of the waited-for pod alone,
// naming the step, once it is due; before that, and to a pod that said its
// word, nothing.
func TestTheRetellingIsSentInThePodsPatch(t *testing.T) {
	g := NewWithT(t)
	st, to, copied := copyOfTwoSlots(t)
	started := st.plan.Started
	patched := func(after time.Duration) []string {
		t.Helper()
		var sent []string
		c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(_ context.Context, _ client.WithWatch, obj client.Object, patch client.Patch, _ ...client.PatchOption) error {
				data, err := patch.Data(obj)
				sent = append(sent, obj.GetName()+" "+string(data))
				if err != nil {
					return err
				}
				// Replaced meanwhile, as far as tellPods can tell: so it
				// tells no store (there is none here) of the patch.
				return apierrors.NewNotFound(corev1.Resource("pods"), obj.GetName())
			},
		}).Build()
		s := &scope{
			Reconciler: &Reconciler{Client: c, Logs: logsOf{"c-0": copied}, Recorder: events.NewFakeRecorder(10), Now: func() time.Time { return started.Add(after) }},
			m:          &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}},
		}
		// Both pods were told of the membership and its seal.
		s.tell = podNews{membership: "4", seal: "sealed"}
		for i, name := range []string{"c-0", "c-1"} {
			s.obs.Pods = append(s.obs.Pods, &owned.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
				IP: fmt.Sprintf("10.0.0.%d", i+1), MembershipVersion: "4", MembershipSeal: "sealed"})
		}
		_, _, _, err := s.moveStep(context.Background(), st, to, nil)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = tellPods(context.Background(), s)
		g.Expect(err).NotTo(HaveOccurred())
		return sent
	}

	g.Expect(patched(4*time.Second)).To(BeEmpty(), "not before 5 s")
	g.Expect(patched(6 * time.Second)).To(ConsistOf(
		`c-1 {"metadata":{"annotations":{"` + desired.AnnotationMembershipRetold + `":"4 copy 1"},"uid":"c-1"}}`))
}
