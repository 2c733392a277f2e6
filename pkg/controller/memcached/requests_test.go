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
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	cacheac "github.com/example/memcached-operator/applyconfig/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

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

// writesOtherThanApplies are the writes among rs that the operator must
// never send: anything but a server-side apply, an event, a delete with a
// UID precondition of an object the operator owns or of one of its pods,
// and a patch of a pod that names the pod's UID (the membership, the seal
// and the Secrets' digest it is told of, as a merge patch) or tests it
// (the rollout's in-place steps and resizes, as a JSON patch). A delete's body is
// DeleteOptions, in protobuf: its one UID is the precondition's.
func writesOtherThanApplies(rs []testenv.Request) []testenv.Request {
	uid := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	deletable := regexp.MustCompile(`/(poddisruptionbudgets|servicemonitors|networkpolicies|deployments|pods)/[^/]+$`)
	pod := regexp.MustCompile(`/namespaces/[^/]+/pods/[^/]+(/resize)?$`)
	mergeNamingUID := regexp.MustCompile(`^\{"metadata":\{.*"uid":"` + uid.String() + `"`)
	jsonTestingUID := regexp.MustCompile(`\{"op":"test","path":"/metadata/uid","value":"` + uid.String() + `"\}`)
	var bad []testenv.Request
	for _, r := range rs {
		switch {
		case r.Method == http.MethodGet, strings.Contains(r.Path, "/events"), r.IsApply():
		case r.Method == http.MethodDelete && deletable.MatchString(r.Path) && strings.Contains(r.Body, "DeleteOptions") && uid.MatchString(r.Body):
		case r.Method == http.MethodPatch && pod.MatchString(r.Path) && strings.HasPrefix(r.ContentType, "application/merge-patch") && mergeNamingUID.MatchString(r.Body):
		case r.Method == http.MethodPatch && pod.MatchString(r.Path) && strings.HasPrefix(r.ContentType, "application/json-patch") && jsonTestingUID.MatchString(r.Body):
		default:
			bad = append(bad, r)
		}
	}
	return bad
}

// Creating a Memcached and scaling it sends no read: whether its objects'
// names are taken is known from the store.
func TestCreateAndScaleReadNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	// Each step costs its applies, its events, its pod patches and one
	// status write: the StatefulSet controller's reports on a rollout that
	// ends within the status package's report timeout are not written one
	// by one.
	step := func(name string, do func(), want ...string) {
		t.Helper()
		mark := requests.Mark()
		do()
		all := requests.Since(mark, inNamespace(ns), testenv.NotWatch)
		var sent []string
		for _, r := range all {
			sent = append(sent, verbAndResource(r))
			t.Logf("%s: %s %s", name, r, r.Body)
		}
		g.Expect(sent).To(ConsistOf(want), name)
		expectPodsToldAfterTheKubeletCaughtUp(t, all)
	}
	m := &cachev1alpha1.Memcached{}
	step("create", func() {
		m = newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)})
		converged(t, m)
	},
		"apply statefulsets", "apply services", "create events", // Created
		// The membership: none yet, then the pod once it has an address,
		// which is told of it, with an event.
		"apply configmaps", "apply configmaps", "patch pods", "create events",
		"apply memcacheds/status")
	step("scale 1 -> 2", func() {
		g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":2}}`)))).To(Succeed())
		converged(t, m)
	},
		"apply statefulsets", "apply poddisruptionbudgets", "create events", // Scaled
		"apply configmaps", "patch pods", "patch pods", "create events",
		"apply memcacheds/status")
}

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
