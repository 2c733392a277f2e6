//go:build integration

package memcached_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/controller/memcached"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

// The operator's JSON patches of pods test what the store held: the
// apiserver's answer to a patch it cannot apply to the pod as it is (a
// test that fails, a path gone) is told from its refusal of the patched
// pod, so that a patch of a pod the store holds an older version of is let
// go for the next reconcile, with no error, no backoff and no ApplyFailed
// in the status.
func TestAFailedPatchTestIsToldFromOtherRefusals(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "patched", Labels: map[string]string{"revision": "r2"}}}
	g.Expect(k8s.Create(ctx, obj)).To(Succeed())
	patch := func(ops string) error {
		return k8s.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, []byte(ops)))
	}

	err := patch(`[{"op":"test","path":"/metadata/labels/revision","value":"r1"},{"op":"replace","path":"/metadata/labels/revision","value":"r3"}]`)
	g.Expect(err).To(HaveOccurred())
	g.Expect(memcached.FailedTest(err)).To(BeTrue(), "a value the store held no longer there: %v", err)
	err = patch(`[{"op":"test","path":"/metadata/uid","value":"another"}]`)
	g.Expect(memcached.FailedTest(err)).To(BeTrue(), "another object of the name: %v", err)
	err = patch(`[{"op":"test","path":"/metadata/annotations/gone","value":"x"}]`)
	g.Expect(memcached.FailedTest(err)).To(BeTrue(), "a value the store held, removed since: %v", err)
	err = patch(`[{"op":"remove","path":"/metadata/annotations/gone"}]`)
	g.Expect(memcached.FailedTest(err)).To(BeTrue(), "an annotation the store held, removed since: %v", err)

	// The patched object refused: a real error, told.
	err = patch(`[{"op":"replace","path":"/metadata/labels/revision","value":"not a valid label value!"}]`)
	g.Expect(err).To(HaveOccurred())
	g.Expect(memcached.FailedTest(err)).To(BeFalse(), "%v", err)
	g.Expect(memcached.FailedTest(nil)).To(BeFalse())
}

// A pod's patch let go for a failed test is looked at again soon, not
// only on the pod's next event, which may never come (the pod does not
// change again, or the event was missed); a patch applied changes nothing
// of when the rollout looks again.
func TestAPodPatchLetGoIsLookedAtAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slot-0", Labels: map[string]string{"controller-revision-hash": "r2"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: "memcached:1.6"}}},
	}
	g.Expect(k8s.Create(ctx, pod)).To(Succeed())
	p := &owned.Pod{}
	p.Name, p.Namespace, p.UID = pod.Name, pod.Namespace, pod.UID
	relabel := func(from, to string) []map[string]any {
		return []map[string]any{
			{"op": "test", "path": "/metadata/labels/controller-revision-hash", "value": from},
			{"op": "replace", "path": "/metadata/labels/controller-revision-hash", "value": to},
		}
	}

	// As the store held it before a patch it has not seen yet.
	sent, result, err := memcached.PatchPodAndLookAgain(ctx, k8s, p, relabel("r1", "r3"), ctrl.Result{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sent).To(BeFalse())
	g.Expect(result.RequeueAfter).To(BeNumerically(">", 0), "a patch let go is looked at again")
	sent, result, err = memcached.PatchPodAndLookAgain(ctx, k8s, p, relabel("r1", "r3"), ctrl.Result{RequeueAfter: time.Hour})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sent).To(BeFalse())
	g.Expect(result.RequeueAfter).To(BeNumerically("<", time.Hour), "sooner than the phase would")

	sent, result, err = memcached.PatchPodAndLookAgain(ctx, k8s, p, relabel("r2", "r3"), ctrl.Result{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sent).To(BeTrue())
	g.Expect(result).To(Equal(ctrl.Result{}), "nothing let go: the pod's event is the next news")
}

// The rollout, not only its helper: a pod the store holds an older
// version of (another hand changed its revision label since) is not
// patched, and the rollout looks at it again soon rather than on the pod's
// next event; once the store holds it as it is, the rollout restarts its
// memcached with the new image, and nothing is let go.
func TestTheRolloutLooksAgainAtAPodWhosePatchItLetGo(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slot-0", Labels: map[string]string{"controller-revision-hash": "r3"},
			Annotations: map[string]string{desired.AnnotationPodShape: "s", desired.AnnotationMemcachedSettings: "--threads=4"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: desired.WarmInstallContainerName, Image: "operator:1"}},
			Containers:     []corev1.Container{{Name: desired.ContainerName, Image: "memcached:1"}},
		},
	}
	g.Expect(k8s.Create(ctx, pod)).To(Succeed())
	held := &owned.Pod{Revision: "r1", Shape: "s", MemcachedID: "c1", Ready: true,
		Labels:      map[string]string{"controller-revision-hash": "r1"},
		Annotations: map[string]string{desired.AnnotationPodShape: "s", desired.AnnotationMemcachedSettings: "--threads=4"},
		Images: []owned.ContainerImage{
			{Name: desired.WarmInstallContainerName, Image: "operator:1", Init: true},
			{Name: desired.ContainerName, Image: "memcached:1"},
		},
	}
	held.Name, held.Namespace, held.UID = pod.Name, pod.Namespace, pod.UID
	want := appsv1ac.StatefulSet("slot", ns).WithSpec(appsv1ac.StatefulSetSpec().WithTemplate(corev1ac.PodTemplateSpec().
		WithAnnotations(map[string]string{desired.AnnotationPodShape: "s", desired.AnnotationMemcachedSettings: "--threads=4"}).
		WithSpec(corev1ac.PodSpec().
			WithInitContainers(corev1ac.Container().WithName(desired.WarmInstallContainerName).WithImage("operator:1")).
			WithContainers(corev1ac.Container().WithName(desired.ContainerName).WithImage("memcached:2")))))
	image := func() string {
		got := &corev1.Pod{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), got)).To(Succeed())
		return got.Spec.Containers[0].Image
	}

	result, recorded, err := memcached.RollOnePod(ctx, k8s, "slot", held, "r2", want)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.RequeueAfter).To(BeNumerically(">", 0), "a patch let go is looked at again")
	g.Expect(recorded).To(BeEmpty())
	g.Expect(image()).To(Equal("memcached:1"), "not patched: the store held an older version")

	held.Revision, held.Labels = "r3", map[string]string{"controller-revision-hash": "r3"}
	result, recorded, err = memcached.RollOnePod(ctx, k8s, "slot", held, "r2", want)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result).To(Equal(ctrl.Result{}), "nothing let go: the pod's event is the next news")
	g.Expect(image()).To(Equal("memcached:2"))
	g.Expect(recorded).To(ConsistOf(ContainSubstring("RestartingInPlace")))
}
