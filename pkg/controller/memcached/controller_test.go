//go:build integration

package memcached_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/podtemplate"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

func TestStatefulSetIsCreatedWithOwnerAndOurFieldManagerOnly(t *testing.T) {
	g := NewWithT(t)
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)})
	m, dep := converged(t, m)

	g.Expect(metav1.IsControlledBy(dep, m)).To(BeTrue(), "controller owner reference to the Memcached")
	g.Expect(*dep.Spec.Replicas).To(Equal(int32(2)))
	g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal(defaultImage))
	for _, e := range dep.ManagedFields {
		if e.Subresource == "" {
			g.Expect(e.Manager).To(Equal(owned.FieldManager), "only the operator writes the Deployment's spec and metadata")
			g.Expect(e.Operation).To(Equal(metav1.ManagedFieldsOperationApply))
		}
	}
	for _, e := range m.ManagedFields {
		if e.Subresource == "status" {
			g.Expect(e.Manager).To(Equal(owned.StatusFieldManager))
			g.Expect(e.Operation).To(Equal(metav1.ManagedFieldsOperationApply))
		}
	}
	g.Expect(m.Status.Replicas).To(Equal(int32(2)))
	g.Expect(m.Status.Selector).To(Equal("cache.example.com/memcached=cache"))
	for _, c := range m.Status.Conditions {
		g.Expect(c.Reason).NotTo(BeEmpty())
		g.Expect(c.Message).NotTo(BeEmpty())
		g.Expect(c.ObservedGeneration).To(Equal(m.Generation))
	}
	g.Expect(events(t, ns, "cache", "Created")).To(ConsistOf(HaveField("Note", "Created StatefulSet cache with 2 replicas; created Service cache; created ConfigMap cache-membership; created PodDisruptionBudget cache")),
		"one event for everything one reconcile created")
}

func TestScaledStatefulSetIsRevertedWithEvent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)})
	_, dep := converged(t, m)

	// What `kubectl scale statefulset/cache --replicas=5` sends.
	scale := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":5}}`))
	// The answer is a Scale: decode it into a copy, not into dep.
	g.Expect(k8s.SubResource("scale").Patch(ctx, dep.DeepCopy(), scale, client.FieldOwner("kubectl"))).To(Succeed())

	g.Eventually(func(g Gomega) {
		got := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), got)).To(Succeed())
		g.Expect(*got.Spec.Replicas).To(Equal(int32(2)))
		e := events(t, ns, "cache", "DriftCorrected")
		g.Expect(e).NotTo(BeEmpty())
		g.Expect(e[0].Note).To(ContainSubstring("kubectl"), "the event names who changed the field")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

func TestEditedStatefulSetFieldIsRestoredAndOthersKept(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)})
	_, dep := converged(t, m)

	// A person edits the image (ours) and sets a field the operator leaves
	// to others (minReadySeconds), as kubectl edit would: an update.
	patch := client.RawPatch(types.StrategicMergePatchType, []byte(
		`{"spec":{"minReadySeconds":7,"template":{"spec":{"containers":[{"name":"memcached","image":"memcached:edited"}]}}}}`))
	g.Expect(k8s.Patch(ctx, dep, patch, client.FieldOwner("kubectl-edit"))).To(Succeed())

	g.Eventually(func(g Gomega) {
		got := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), got)).To(Succeed())
		g.Expect(got.Spec.Template.Spec.Containers[0].Image).To(Equal(defaultImage))
		g.Expect(got.Spec.MinReadySeconds).To(Equal(int32(7)), "a field the operator does not own is left alone")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

func TestRemovingOptionalFieldRemovesItFromStatefulSet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{
		Size:    ptr.To[int32](1),
		Threads: ptr.To[int32](2),
		Resources: &corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
	})
	_, dep := converged(t, m)
	g.Expect(dep.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String()).To(Equal("128Mi"))
	g.Expect(podtemplate.MemcachedFlags(dep.Spec.Template)).To(ContainElement("--threads=2"))

	// Another manager owns an annotation on the pod template: it stays.
	foreign := appsv1ac.StatefulSet("cache", ns).WithSpec(appsv1ac.StatefulSetSpec().WithTemplate(
		corev1ac.PodTemplateSpec().WithAnnotations(map[string]string{"example.com/restartedAt": "now"})))
	g.Expect(k8s.Apply(ctx, foreign, client.FieldOwner("rollout-restarter"))).To(Succeed())

	g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"resources":null,"threads":null}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), got)).To(Succeed())
		g.Expect(got.Spec.Template.Spec.Containers[0].Resources.Limits).To(BeEmpty())
		g.Expect(podtemplate.MemcachedFlags(got.Spec.Template)).NotTo(ContainElement("--threads=2"))
		g.Expect(got.Spec.Template.Annotations).To(HaveKeyWithValue("example.com/restartedAt", "now"))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

func TestScaleSubresourceScalesTheStatefulSet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)})
	converged(t, m)

	// What `kubectl scale memcached/cache --replicas=3` sends.
	g.Expect(k8s.SubResource("scale").Patch(ctx, m.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`)))).To(Succeed())
	got, dep := converged(t, m)
	g.Expect(*dep.Spec.Replicas).To(Equal(int32(3)))
	g.Expect(got.Status.Replicas).To(Equal(int32(3)))
	g.Expect(events(t, ns, "cache", "Scaled")).NotTo(BeEmpty())
}

func TestDeletedMemcachedIsGarbageCollected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)})
	_, dep := converged(t, m)

	g.Expect(k8s.Delete(ctx, m)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(dep), &appsv1.StatefulSet{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Deployment garbage-collected")
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty(), "pods garbage-collected")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

func TestDeletedStatefulSetIsRecreated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	// No pod: no pod's deletion by the garbage collector, no budget's
	// status change, reconciles the Memcached as well. The StatefulSet's
	// deletion event alone is left to bring it back (no resync runs
	// within the test).
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](0)})
	dep := &appsv1.StatefulSet{}
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), dep)).To(Succeed())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// Deleted within a minute of its creation, while the store would still
	// remember creating it if its watch had not made it forget: the
	// deletion's event recreates it, well before that memory would lapse.
	// Once the creation's own events are handled.
	time.Sleep(2 * time.Second)
	g.Expect(k8s.Delete(ctx, dep)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), got)).To(Succeed())
		g.Expect(got.UID).NotTo(Equal(dep.UID), "a new StatefulSet")
	}).WithTimeout(atOnce).WithPolling(poll).Should(Succeed())
}

// The operator no longer reads a Memcached before creating its objects, to
// make sure it still exists: objects created for a Memcached deleted a
// moment before, while the cache still held it, are owned by a UID that no
// longer exists, and the garbage collector deletes them. This is what the
// operator would apply in that moment.
func TestObjectsOfADeletedMemcachedAreCollected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "gone", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](0)})
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
	g.Expect(k8s.Delete(ctx, m)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(m), &cachev1alpha1.Memcached{}))
	}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue())

	stale := m.DeepCopy()
	stale.Name = "gone-late"
	stale.Spec.Size = ptr.To[int32](2)
	g.Expect(k8s.Apply(ctx, desired.StatefulSet(stale, testenv.Images, desired.SecretDigests{}), client.FieldOwner(owned.FieldManager))).To(Succeed())
	g.Expect(k8s.Apply(ctx, desired.Service(stale, false), client.FieldOwner(owned.FieldManager))).To(Succeed())
	g.Eventually(func(g Gomega) {
		key := client.ObjectKey{Namespace: ns, Name: stale.Name}
		g.Expect(apierrors.IsNotFound(k8s.Get(ctx, key, &appsv1.StatefulSet{}))).To(BeTrue(), "Deployment collected")
		g.Expect(apierrors.IsNotFound(k8s.Get(ctx, key, &corev1.Service{}))).To(BeTrue(), "Service collected")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// manyRetries lets eight writers contending for one object all get through.
var manyRetries = wait.Backoff{Steps: 100, Duration: 10 * time.Millisecond, Factor: 1.1, Jitter: 0.5, Cap: time.Second}
