//go:build integration

package memcached_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	cacheac "github.com/example/memcached-operator/applyconfig/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/controller/memcached"
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
	g.Expect(events(t, ns, "cache", "Created")).To(ConsistOf(HaveField("Note", "Created StatefulSet cache with 2 replicas; created Service cache; created PodDisruptionBudget cache")),
		"one event for everything one reconcile created")
}

func TestForeignLabelAndAnnotationOnStatefulSetSurvive(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)})
	converged(t, m)

	// Another manager (a GitOps tool, a policy engine) labels the Deployment.
	foreign := appsv1ac.StatefulSet("cache", ns).
		WithLabels(map[string]string{"team": "payments"}).
		WithAnnotations(map[string]string{"example.com/owner": "payments"})
	g.Expect(k8s.Apply(ctx, foreign, client.FieldOwner("policy-engine"))).To(Succeed())

	// Many reconciles: every spec change reconciles and reapplies.
	for size := int32(2); size <= 4; size++ {
		g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"size":%d}}`, size)))).To(Succeed())
		_, dep := converged(t, m)
		g.Expect(*dep.Spec.Replicas).To(Equal(size))
		g.Expect(dep.Labels).To(HaveKeyWithValue("team", "payments"))
		g.Expect(dep.Annotations).To(HaveKeyWithValue("example.com/owner", "payments"))
		g.Expect(dep.Labels).To(HaveKeyWithValue(desired.LabelManagedBy, desired.ManagedBy))
	}
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

func TestForeignConditionOnMemcachedStatusSurvives(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)})
	converged(t, m)

	foreign := cacheac.Memcached("cache", ns).WithStatus(cacheac.MemcachedStatus().WithConditions(
		metav1ac.Condition().WithType("BackupReady").WithStatus(metav1.ConditionTrue).
			WithReason("BackedUp").WithMessage("Backed up").WithLastTransitionTime(metav1.Now())))
	g.Expect(k8s.Status().Apply(ctx, foreign, client.FieldOwner("backup-controller"))).To(Succeed())

	for size := int32(2); size <= 3; size++ {
		g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"size":%d}}`, size)))).To(Succeed())
		got, _ := converged(t, m)
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, "BackupReady")).NotTo(BeNil(), "another controller's condition survives")
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue())
	}
}

func TestSpecChangeSendsExactlyOneStatefulSetApply(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)})
	converged(t, m)

	mark := requests.Mark()
	g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"image":"memcached:1.6.38"}}`)))).To(Succeed())
	_, dep := converged(t, m)
	g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal("memcached:1.6.38"))

	writes := requests.Since(mark, inNamespace(ns), testenv.PathContains("/statefulsets/"), testenv.NotWatch,
		func(r testenv.Request) bool { return r.Method != http.MethodGet })
	g.Expect(writes).To(HaveLen(1), "one apply of the Deployment, got %v", writes)
	g.Expect(writes[0].IsApply()).To(BeTrue())
	reads := requests.Since(mark, inNamespace(ns), testenv.NotWatch, func(r testenv.Request) bool { return r.Method == http.MethodGet })
	g.Expect(reads).To(BeEmpty(), "a spec change of a field the operator owns is read from the cache only")
}

func TestSteadyStateSendsNoRequests(t *testing.T) {
	g := NewWithT(t)
	ns := testenv.Namespace(t, k8s)
	var ms []*cachev1alpha1.Memcached
	for i := range 5 {
		ms = append(ms, newMemcached(t, ns, fmt.Sprintf("cache-%d", i), cachev1alpha1.MemcachedSpec{
			Size: ptr.To[int32](int32(i % 3)), Threads: ptr.To[int32](2), // sizes 0, 1 and 2
			Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.1")}},
		}))
	}
	for _, m := range ms {
		converged(t, m)
	}
	// Objects of earlier tests are still being deleted with their
	// namespaces, and their status is still written: wait until they are gone.
	g.Eventually(func(g Gomega) {
		list := &cachev1alpha1.MemcachedList{}
		g.Expect(k8s.List(context.Background(), list)).To(Succeed())
		for _, m := range list.Items {
			g.Expect(m.Namespace).To(Equal(ns), "Memcached of another test still exists")
		}
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	// Let the last status writes and their watch events settle.
	time.Sleep(2 * time.Second)

	mark := requests.Mark()
	skipped := counterSum(t, "memcached_operator_applies_skipped_total")
	// A reconcile of every Memcached, from a change of its Deployment that
	// is not the operator's business (a resync's reconcile would find the
	// same: nothing to do).
	for _, m := range ms {
		nudge(t, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}})
	}
	time.Sleep(window)
	sent := requests.Since(mark, testenv.NotWatch)
	g.Expect(sent).To(BeEmpty(), "a converged operator sends nothing, reconciles included")
	// The reconciles ran: each found nothing to apply (the Deployment, the
	// Service, at least).
	g.Expect(counterSum(t, "memcached_operator_applies_skipped_total")).To(BeNumerically(">=", skipped+float64(2*len(ms))),
		"every Memcached was reconciled again in the window")
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
	g.Expect(dep.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--threads=2"))

	// Another manager owns an annotation on the pod template: it stays.
	foreign := appsv1ac.StatefulSet("cache", ns).WithSpec(appsv1ac.StatefulSetSpec().WithTemplate(
		corev1ac.PodTemplateSpec().WithAnnotations(map[string]string{"example.com/restartedAt": "now"})))
	g.Expect(k8s.Apply(ctx, foreign, client.FieldOwner("rollout-restarter"))).To(Succeed())

	g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"resources":null,"threads":null}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), got)).To(Succeed())
		c := got.Spec.Template.Spec.Containers[0]
		g.Expect(c.Resources.Limits).To(BeEmpty())
		g.Expect(c.Command).NotTo(ContainElement("--threads=2"))
		g.Expect(got.Spec.Template.Annotations).To(HaveKeyWithValue("example.com/restartedAt", "now"))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

func TestForeignStatefulSetIsLeftAloneAndReported(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	foreign := foreignStatefulSet(ns, "taken")
	g.Expect(k8s.Create(ctx, foreign)).To(Succeed())

	m := newMemcached(t, ns, "taken", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)})
	g.Eventually(func(g Gomega) {
		blockedBy(g, t, m, string(owned.KindStatefulSet))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	got := &appsv1.StatefulSet{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(foreign), got)).To(Succeed())
	g.Expect(*got.Spec.Replicas).To(Equal(int32(1)))
	g.Expect(got.OwnerReferences).To(BeEmpty())
	for _, e := range got.ManagedFields {
		g.Expect(e.Manager).NotTo(Equal(owned.FieldManager))
	}
	// An apply sent in the moment before the store sees the Deployment
	// (created just before the Memcached) creates nothing and takes no
	// field: the apiserver refuses it.
	writes := requests.Since(0, inNamespace(ns), testenv.PathContains("/statefulsets/"), testenv.Wrote)
	g.Expect(writes).To(BeEmpty(), "nothing is written to a Deployment the operator does not own")
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

func TestManyMemcachedsWithSeveralWorkersGiveNoConflicts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	var ms []*cachev1alpha1.Memcached
	for i := range 20 {
		ms = append(ms, newMemcached(t, ns, fmt.Sprintf("cache-%02d", i), cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}))
	}
	// Change every spec while the first rollouts are still under way.
	for _, m := range ms {
		g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":2}}`)))).To(Succeed())
	}
	for _, m := range ms {
		_, dep := converged(t, m)
		g.Expect(*dep.Spec.Replicas).To(Equal(int32(2)))
	}
	// An event's creation answered 409 is client-go's event broadcaster
	// meeting an event of that name it created before (seen in a namespace
	// being deleted): no write of the operator's state lost to a conflict.
	conflicts := requests.Since(0, func(r testenv.Request) bool {
		return r.Code == http.StatusConflict && !(r.Method == http.MethodPost && strings.Contains(r.Path, "/apis/events.k8s.io/"))
	})
	g.Expect(conflicts).To(BeEmpty())
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

// TestOnlyAppliesAreWritten scales a Memcached 1, 2, 1 and checks what the
// controller sent: the objects it owns are written only by server-side
// apply, and the budget it no longer wants is deleted with a UID
// precondition naming the budget it read. The same check runs over every
// request of the suite once all its tests have run (see run).
func TestOnlyAppliesAreWritten(t *testing.T) {
	g := NewWithT(t)
	// Make sure this test has something to check even when run alone.
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)})
	converged(t, m)
	g.Expect(k8s.Patch(context.Background(), m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":2}}`)))).To(Succeed())
	converged(t, m)
	// Down to 1: the budget is no longer wanted, and apply cannot delete.
	budget := &policyv1.PodDisruptionBudget{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(m), budget)).To(Succeed())
	g.Expect(k8s.Patch(context.Background(), m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":1}}`)))).To(Succeed())
	converged(t, m)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(m), &policyv1.PodDisruptionBudget{}))
	}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue())

	deletes := requests.Since(0, testenv.PathContains("/poddisruptionbudgets/"), func(r testenv.Request) bool { return r.Method == http.MethodDelete })
	g.Expect(deletes).To(ContainElement(HaveField("Path", HaveSuffix("/namespaces/"+ns+"/poddisruptionbudgets/cache"))), "this test's budget was deleted")
	g.Expect(writesOtherThanApplies(requests.Since(0))).To(BeEmpty())
	mine := requests.Since(0, testenv.PathContains("/namespaces/"+ns+"/poddisruptionbudgets/cache"), func(r testenv.Request) bool { return r.Method == http.MethodDelete })
	// A reconcile between the delete and the store seeing it may delete
	// again, and find nothing (404): never another budget.
	g.Expect(mine).To(ContainElement(HaveField("Code", http.StatusOK)))
	for _, d := range mine {
		g.Expect(d.Body).To(ContainSubstring(string(budget.UID)), "the precondition names the budget that was read")
		g.Expect(d.Code).To(BeElementOf(http.StatusOK, http.StatusNotFound))
	}
}

// writesOtherThanApplies are the writes among rs that are neither a
// server-side apply nor a delete with a UID precondition of an object the
// operator owns, nor an event: what the operator must never send. A delete's
// body is DeleteOptions, in protobuf: its one UID is the precondition's.
func writesOtherThanApplies(rs []testenv.Request) []testenv.Request {
	uid := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	deletable := regexp.MustCompile(`/(poddisruptionbudgets|servicemonitors|networkpolicies|deployments)/[^/]+$`)
	var bad []testenv.Request
	for _, r := range rs {
		switch {
		case r.Method == http.MethodGet, strings.Contains(r.Path, "/events"), r.IsApply():
		case r.Method == http.MethodDelete && deletable.MatchString(r.Path) && strings.Contains(r.Body, "DeleteOptions") && uid.MatchString(r.Body):
		default:
			bad = append(bad, r)
		}
	}
	return bad
}

func TestDeletedStatefulSetIsRecreated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	// One pod: no budget, whose status the deletion changes too (which
	// would reconcile the Memcached as well).
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)})
	_, dep := converged(t, m)

	// Deleted within a minute of its creation, while the store would still
	// remember creating it if its watch had not made it forget: the
	// deletion's event recreates it, well before that memory would lapse.
	// Once the rollout's own events are handled: the deletion's event
	// alone is left to bring it back (no resync runs within the test).
	time.Sleep(2 * time.Second)
	g.Expect(k8s.Delete(ctx, dep)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), got)).To(Succeed())
		g.Expect(got.UID).NotTo(Equal(dep.UID), "a new Deployment")
	}).WithTimeout(atOnce).WithPolling(poll).Should(Succeed())
	converged(t, m)
}

func TestForeignStatefulSetIsPickedUpOnceRemoved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	foreign := foreignStatefulSet(ns, "cache")
	g.Expect(k8s.Create(ctx, foreign)).To(Succeed())
	mark := requests.Mark()
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)})
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionStalled)).To(BeTrue())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// Its owner removes it: the store's watch of other objects' names sees
	// the name freed, and the operator creates its own.
	g.Expect(k8s.Delete(ctx, foreign)).To(Succeed())
	_, dep := converged(t, m)
	g.Expect(metav1.IsControlledBy(dep, m)).To(BeTrue())
	// The foreign Deployment was known, and its name found free, from the
	// store's watches: no read of any kind in the namespace.
	g.Expect(requests.Since(mark, inNamespace(ns), testenv.NotWatch, isGet)).To(BeEmpty(), "no GET")
}

// isGet matches reads.
func isGet(r testenv.Request) bool { return r.Method == http.MethodGet }

// The deletion of another's object reconciles the Memcached of its name at
// once, from the store's watch of other objects' names: shown here on a
// store without resync and no Memcached at all, so that nothing else could
// enqueue it.
func TestAForeignObjectsDeletionReconcilesTheMemcachedOfItsName(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := testenv.Namespace(t, k8s)
	foreign := foreignStatefulSet(ns, "cache")
	g.Expect(k8s.Create(ctx, foreign)).To(Succeed())

	hc, err := rest.HTTPClientFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	store, err := owned.NewStore(cfg, hc, []string{ns}, memcached.OwnSelector, memcached.OthersSelector, 0, owned.BuiltinSchemas())
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = store.Start(ctx) }()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	for _, src := range store.OtherSources(memcached.EnqueueFreedName) {
		g.Expect(src.Start(ctx, q)).To(Succeed())
		g.Expect(src.(source.SyncingSource).WaitForSync(ctx)).To(Succeed())
	}
	key := client.ObjectKeyFromObject(foreign)
	_, found, err := store.Other(owned.KindStatefulSet, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue(), "the foreign Deployment's name is known")
	g.Expect(q.Len()).To(BeZero(), "its creation reconciles nothing")

	g.Expect(k8s.Delete(ctx, foreign)).To(Succeed())
	g.Eventually(q.Len).WithTimeout(timeout).WithPolling(poll).Should(Equal(1))
	item, _ := q.Get()
	g.Expect(item).To(Equal(reconcile.Request{NamespacedName: key}), "the Memcached of the freed name")
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

// Creating a Memcached and scaling it sends no read: whether its objects'
// names are taken is known from the store.
func TestCreateAndScaleReadNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	// Each step costs its applies, its event and one status write: the
	// Deployment controller's reports on a rollout that ends within
	// the status package's report timeout are not written one by one.
	step := func(name string, do func(), wantWrites int) {
		t.Helper()
		mark := requests.Mark()
		do()
		all := requests.Since(mark, inNamespace(ns), testenv.NotWatch)
		t.Logf("%s: %d requests: %v", name, len(all), all)
		reads := requests.Since(mark, inNamespace(ns), testenv.NotWatch, func(r testenv.Request) bool { return r.Method == http.MethodGet })
		g.Expect(reads).To(BeEmpty(), name)
		statusWrites := requests.Since(mark, inNamespace(ns), testenv.NotWatch, func(r testenv.Request) bool { return strings.HasSuffix(r.Path, "/status") })
		g.Expect(statusWrites).To(HaveLen(1), "%s: one status write", name)
		g.Expect(all).To(HaveLen(wantWrites), name)
	}
	m := &cachev1alpha1.Memcached{}
	// The Deployment, the Service, the status, the Created event.
	step("create", func() {
		m = newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)})
		converged(t, m)
	}, 4)
	// The Deployment, the PodDisruptionBudget, the status, the Scaled event.
	step("scale 1 -> 2", func() {
		g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":2}}`)))).To(Succeed())
		converged(t, m)
	}, 4)
}

// foreignStatefulSet is a StatefulSet of one replica made by someone else.
func foreignStatefulSet(ns, name string) *appsv1.StatefulSet {
	labels := map[string]string{"app": "someone-elses"}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}},
			},
		},
	}
}

// manyRetries lets eight writers contending for one object all get through.
var manyRetries = wait.Backoff{Steps: 100, Duration: 10 * time.Millisecond, Factor: 1.1, Jitter: 0.5, Cap: time.Second}

func TestConcurrentStatusAndScaleWritersLoseNoUpdate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)})
	converged(t, m)

	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for i := range writers {
		// Controllers of their own, each applying its own condition to the
		// status while the operator applies its conditions.
		wg.Go(func() {
			manager := fmt.Sprintf("watcher-%d", i)
			ac := cacheac.Memcached("cache", ns).WithStatus(cacheac.MemcachedStatus().WithConditions(
				metav1ac.Condition().WithType(fmt.Sprintf("Watched%d", i)).WithStatus(metav1.ConditionTrue).
					WithReason("Watched").WithMessage("Watched").WithLastTransitionTime(metav1.Now())))
			errs <- k8s.Status().Apply(ctx, ac, client.FieldOwner(manager))
		})
		// Scalers incrementing the size through the scale subresource, each
		// read-modify-write guarded by the resourceVersion and retried on conflict.
		wg.Go(func() {
			errs <- retry.RetryOnConflict(manyRetries, func() error {
				scale := &autoscalingv1.Scale{}
				if err := k8s.SubResource("scale").Get(ctx, m, scale); err != nil {
					return err
				}
				scale.Spec.Replicas++
				return k8s.SubResource("scale").Update(ctx, m.DeepCopy(), client.WithSubResourceBody(scale))
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}

	got, dep := converged(t, m)
	g.Expect(*got.Spec.Size).To(Equal(int32(1+writers)), "every increment counted")
	g.Expect(*dep.Spec.Replicas).To(Equal(int32(1 + writers)))
	for i := range writers {
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, fmt.Sprintf("Watched%d", i))).NotTo(BeNil(), "condition of watcher-%d kept", i)
	}
	g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue())
}
