//go:build integration

package memcached_test

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/podtemplate"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

// While the Deployment controller has not reported on a Deployment the
// operator just changed, the operator writes no status: it would say only
// that the report is pending. The Deployment controller is held (SIGSTOP)
// so that its report cannot come.
func TestNoStatusIsWrittenUntilTheDeploymentControllerReports(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)})
	converged(t, m)

	pids, err := cluster.PIDs()
	g.Expect(err).NotTo(HaveOccurred())
	kcm := pids["kube-controller-manager"]
	g.Expect(kcm).NotTo(BeZero())
	g.Expect(syscall.Kill(kcm, syscall.SIGSTOP)).To(Succeed())
	resumed := false
	resume := func() {
		if !resumed {
			g.Expect(syscall.Kill(kcm, syscall.SIGCONT)).To(Succeed())
			resumed = true
		}
	}
	t.Cleanup(resume)

	mark := requests.Mark()
	g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"threads":3}}`)))).To(Succeed())
	dep := &appsv1.StatefulSet{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), dep)).To(Succeed())
		g.Expect(podtemplate.MemcachedFlags(dep.Spec.Template)).To(ContainElement("--threads=3"))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "the operator applies the change")
	g.Expect(dep.Status.ObservedGeneration).To(BeNumerically("<", dep.Generation), "the Deployment controller is held")

	statusWrites := func() []testenv.Request {
		return requests.Since(mark, testenv.PathContains("/namespaces/"+ns+"/memcacheds/cache/status"),
			func(r testenv.Request) bool { return r.Method != http.MethodGet })
	}
	nudge(t, dep) // a reconcile meanwhile, as a resync's
	g.Consistently(statusWrites).WithTimeout(window).WithPolling(poll).Should(BeEmpty(),
		"no status while the Deployment controller's report is pending, other reconciles included")

	resume()
	got, _ := converged(t, m)
	// Recorded once its answer is back, which may be a moment after the
	// status it wrote is read.
	g.Eventually(statusWrites).WithTimeout(timeout).WithPolling(poll).ShouldNot(BeEmpty(), "the report, once in, is written")
	g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
}

// A Memcached the apiserver admits but whose StatefulSet it refuses is
// reported with the apiserver's message, in Degraded and Stalled and an
// event, and not retried in a loop: only a spec change can fix it. (The CRD
// refuses most such specs itself; a request above its limit is one it
// cannot see, its quantities being beyond the CEL cost budget.) Before
// Kubernetes 1.34 the apiserver does not validate a StatefulSet's pod
// template: it refuses the pods instead, and the status says so
// (PodsForbidden) with the same message.
func TestRefusedDeploymentIsReportedAndNotRetried(t *testing.T) {
	g := NewWithT(t)
	templatesValidated := repo.KubeMinor() >= 34
	reason := cachev1alpha1.ReasonApplyFailed
	if !templatesValidated {
		reason = cachev1alpha1.ReasonPodsForbidden
	}
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{
		Size: ptr.To[int32](1),
		Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		},
	})

	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		for _, ct := range []string{cachev1alpha1.ConditionDegraded, cachev1alpha1.ConditionStalled} {
			c := meta.FindStatusCondition(got.Status.Conditions, ct)
			g.Expect(c).NotTo(BeNil(), ct)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), ct)
			g.Expect(c.Reason).To(Equal(reason), ct)
			g.Expect(c.Message).To(ContainSubstring("must be less than or equal to cpu limit"), "%s carries the apiserver's message", ct)
		}
		if templatesValidated {
			g.Expect(events(t, ns, "cache", "ApplyRejected")).NotTo(BeEmpty())
		}
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// One event (a change of the Service that is not the operator's
	// business) reconciles it again: one more apply, refused, and no
	// retry. A retry with the controller's backoff (5 ms, doubling) would
	// send about ten in the window. (One more may be under way at the
	// mark: the Service's creation reconciles it too.) Before 1.34 the
	// apiserver took the StatefulSet, whose pods it refuses: there is
	// nothing to apply again, and nothing is retried either.
	fewest := 1
	if !templatesValidated {
		fewest = 0
	}
	mark := requests.Mark()
	nudge(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}})
	time.Sleep(window)
	applies := requests.Since(mark, testenv.PathContains("/namespaces/"+ns+"/statefulsets/cache"), func(r testenv.Request) bool { return r.IsApply() })
	g.Expect(len(applies)).To(And(BeNumerically(">=", fewest), BeNumerically("<=", fewest+1)), "the event's reconcile, no hot retry: %v", applies)
	statusWrites := requests.Since(mark, testenv.PathContains("/namespaces/"+ns+"/memcacheds/cache/status"), testenv.Wrote)
	g.Expect(len(statusWrites)).To(BeNumerically("<=", 1), "no status written again and again: %v", statusWrites)

	// The spec fixed, the StatefulSet follows.
	g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"resources":{"requests":{"cpu":"1"}}}}`)))).To(Succeed())
	converged(t, m)
}

// A Memcached in a namespace being deleted, held there by another
// controller's finalizer after its Deployment is gone, costs no write and
// no reconcile error, even when its spec changes: no loop retries what
// cannot succeed.
func TestTerminatingNamespaceCausesNoWritesAndNoErrors(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const hold = "test.example.com/hold"
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "terminating-"}}
	g.Expect(k8s.Create(ctx, nsObj)).To(Succeed())
	ns := nsObj.Name
	m := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache", Finalizers: []string{hold}},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)},
	}
	g.Expect(k8s.Create(ctx, m)).To(Succeed())
	t.Cleanup(func() {
		_ = k8s.Patch(context.Background(), m, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	converged(t, m)

	errorsBefore := reconcileErrors(t)
	g.Expect(k8s.Delete(ctx, nsObj)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(got.DeletionTimestamp).NotTo(BeNil())
		err := k8s.Get(ctx, client.ObjectKeyFromObject(m), &appsv1.StatefulSet{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "the Deployment is gone")
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
		g.Expect(nsObj.Status.Phase).To(Equal(corev1.NamespaceTerminating))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	mark := requests.Mark()
	// A spec change (allowed while finalizers hold the Memcached) makes the
	// operator reconcile it in the window.
	g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"threads":2}}`)))).To(Succeed())
	time.Sleep(window)
	writes := requests.Since(mark, inNamespace(ns), testenv.NotWatch, func(r testenv.Request) bool {
		return r.Method != http.MethodGet
	})
	g.Expect(writes).To(BeEmpty(), "nothing is written into a terminating namespace")
	g.Expect(reconcileErrors(t)).To(Equal(errorsBefore), "no reconcile error")
}

// reconcileErrors is controller-runtime's count of the Memcached
// controller's reconcile errors, from the in-process operator's registry.
func reconcileErrors(t *testing.T) float64 {
	t.Helper()
	return counterSum(t, "controller_runtime_reconcile_errors_total", "controller", "memcached")
}

// counterSum sums the samples of a counter of the in-process operator's
// metrics registry, those with label name=value when given.
func counterSum(t *testing.T, name string, label ...string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	found := false
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		found = true
	next:
		for _, s := range f.GetMetric() {
			if len(label) == 2 {
				for _, l := range s.GetLabel() {
					if l.GetName() == label[0] && l.GetValue() != label[1] {
						continue next
					}
				}
			}
			sum += s.GetCounter().GetValue()
		}
	}
	if !found {
		t.Fatalf("no metric %s", name)
	}
	return sum
}
