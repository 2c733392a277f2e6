//go:build integration

package memcached_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/localcluster"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

// The suite runs the controller in-process against a local cluster (real
// apiserver, controller-manager, scheduler and kwok nodes), so Deployments
// really roll out and garbage collection really happens. Every request the
// controller sends is recorded at its transport.
var (
	cluster  *localcluster.Cluster
	k8s      client.Client // the tests' own client; its requests are not recorded
	cfg      *rest.Config  // the tests' own config, for caches of their own
	requests = &testenv.Requests{}
)

const (
	defaultImage = testenv.DefaultImage
	timeout      = 90 * time.Second
	poll         = 200 * time.Millisecond
	// window is how long a test watches for what must not happen (a
	// request at rest, a retry): several of the controller's backoff
	// retries, and of its timed requeues but the report timeout's.
	window = 6 * time.Second
	// atOnce is how long a test allows for what the operator does from
	// one watch event (a deletion, another manager's change): the event's
	// delivery and a reconcile take well under a second here; the rest is
	// slack for a loaded machine. No resync comes to the rescue within it.
	atOnce = 10 * time.Second
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var err error
	cluster, err = localcluster.Create(ctx, "controller-test", localcluster.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := cluster.Delete(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "deleting the cluster:", err)
		}
	}()
	cfg, err = cluster.Config()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths:              []string{repo.Path("manifests", "crd", "bases"), repo.Path("hack", "crds")},
		ErrorIfPathMissing: true,
	}); err != nil {
		fmt.Fprintln(os.Stderr, "installing CRDs:", err)
		return 1
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	testenv.SetLogger()
	// The operator runs as in production: resyncs every 10 hours, so none
	// in a test. What it does, it does from watch events and timed
	// requeues alone.
	done, err := testenv.StartOperator(ctx, requests.Wrap(cfg), testenv.OperatorOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		code = 1
	}
	if !onlyAppliesWritten() {
		code = 1
	}
	return code
}

// onlyAppliesWritten tells, after every test, whether of everything the
// controller sent in the suite the writes are applies, events,
// UID-precondition deletes and patches of one pod's UID only
// (writesOtherThanApplies), and says which are not.
func onlyAppliesWritten() bool {
	all := requests.Since(0)
	if bad := writesOtherThanApplies(all); len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the controller sent %d writes other than applies, UID-precondition deletes and patches of one pod's UID:\n", len(bad))
		for _, r := range bad {
			fmt.Fprintln(os.Stderr, "  ", r)
		}
		return false
	}
	writes := 0
	for _, r := range all {
		if r.Method != http.MethodGet {
			writes++
		}
	}
	fmt.Fprintf(os.Stderr, "every write of the suite's %d requests (%d writes) is an apply, an event, a UID-precondition delete or a patch of one pod's UID\n", len(all), writes)
	return true
}

// newMemcached creates a Memcached and returns it.
func newMemcached(t *testing.T, ns, name string, spec cachev1alpha1.MemcachedSpec) *cachev1alpha1.Memcached {
	t.Helper()
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	NewWithT(t).Expect(k8s.Create(context.Background(), m)).To(Succeed())
	return m
}

// converged waits until m's status reports its current generation, Available
// and not Reconciling, its StatefulSet has rolled out, and its pods were
// told of its membership; it returns both.
func converged(t *testing.T, m *cachev1alpha1.Memcached) (*cachev1alpha1.Memcached, *appsv1.StatefulSet) {
	t.Helper()
	got, dep := &cachev1alpha1.Memcached{}, &appsv1.StatefulSet{}
	defer func() {
		if t.Failed() {
			logPodsAndStatefulSets(t, m.Namespace)
		}
	}()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue(), "Available; status %+v", got.Status)
		g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, cachev1alpha1.ConditionReconciling)).To(BeTrue(), "not Reconciling; status %+v", got.Status)
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(m), dep)).To(Succeed())
		g.Expect(got.Status.ReadyReplicas).To(Equal(*got.Spec.Size), "ready; StatefulSet status %+v", dep.Status)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	toldOfMembership(t, got)
	return got, dep
}

// logPodsAndStatefulSets logs, for a test that failed, the pods, the
// StatefulSets and the events of namespace ns: their controllers, and how
// far they got.
func logPodsAndStatefulSets(t *testing.T, ns string) {
	ctx := context.Background()
	pods, sets := &corev1.PodList{}, &appsv1.StatefulSetList{}
	if err := k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Log(err)
	}
	for _, p := range pods.Items {
		t.Logf("pod %s uid %s controller %v deleting %v phase %s conditions %+v", p.Name, p.UID, metav1.GetControllerOf(&p), p.DeletionTimestamp, p.Status.Phase, p.Status.Conditions)
	}
	if err := k8s.List(ctx, sets, client.InNamespace(ns)); err != nil {
		t.Log(err)
	}
	for _, d := range sets.Items {
		t.Logf("StatefulSet %s uid %s generation %d deleting %v status %+v", d.Name, d.UID, d.Generation, d.DeletionTimestamp, d.Status)
	}
	evs := &eventsv1.EventList{}
	if err := k8s.List(ctx, evs, client.InNamespace(ns)); err != nil {
		t.Log(err)
	}
	for _, e := range evs.Items {
		t.Logf("event %s %s/%s %s %s: %s", e.CreationTimestamp.Format(time.RFC3339), e.Regarding.Kind, e.Regarding.Name, e.ReportingController, e.Reason, e.Note)
	}
}

// blockedBy checks, in an Eventually, that m reports being blocked by an
// object of kind it does not control: Degraded and Stalled True with
// reason <kind>NotOwned, a message naming the object, and an event.
func blockedBy(g Gomega, t *testing.T, m *cachev1alpha1.Memcached, kind string) *cachev1alpha1.Memcached {
	got := &cachev1alpha1.Memcached{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(m), got)).To(Succeed())
	c := meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionDegraded)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(c.Reason).To(Equal(kind + "NotOwned"))
	g.Expect(c.Message).To(ContainSubstring(kind + " " + m.Name + " exists and is not controlled by this Memcached"))
	g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionStalled)).To(BeTrue())
	g.Expect(events(t, m.Namespace, m.Name, kind+"NotOwned")).NotTo(BeEmpty())
	return got
}

// events are the events recorded on the Memcached named name in ns with reason.
func events(t *testing.T, ns, name, reason string) []eventsv1.Event {
	t.Helper()
	list := &eventsv1.EventList{}
	NewWithT(t).Expect(k8s.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "Memcached" && e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// inNamespace matches requests about objects in ns.
func inNamespace(ns string) func(testenv.Request) bool {
	return testenv.PathContains("/namespaces/" + ns + "/")
}

// nudge changes an annotation of obj that the operator does not own, so
// that its watch event reconciles the Memcached that controls obj: a
// reconcile with nothing to do, as a resync's would be.
func nudge(t *testing.T, obj client.Object) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.example.com/nudge":%q}}}`, time.Now().Format(time.RFC3339Nano))
	NewWithT(t).Expect(k8s.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}
