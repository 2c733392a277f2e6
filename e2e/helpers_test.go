//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

const (
	timeout = 2 * time.Minute
	poll    = 250 * time.Millisecond
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = cachev1alpha1.AddToScheme(s)
	return s
}()

// kube is a client of the test cluster that can also watch.
func kube(t *testing.T, cfg *envconf.Config) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(cfg.Client().RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// namespace creates a namespace for one feature and deletes it at the end of the test.
func namespace(t *testing.T, cfg *envconf.Config, prefix string) string {
	t.Helper()
	return labelledNamespace(t, cfg, prefix, nil)
}

// labelledNamespace is namespace with the namespace labelled labels.
func labelledNamespace(t *testing.T, cfg *envconf.Config, prefix string, labels map[string]string) string {
	t.Helper()
	c := kube(t, cfg)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	return ns.Name
}

// converged waits until the Memcached reports its current generation,
// Available, not Reconciling, with size ready pods; it returns the
// Memcached and its StatefulSet.
func converged(t *testing.T, c client.Client, key client.ObjectKey, size int32) (*cachev1alpha1.Memcached, *appsv1.StatefulSet) {
	t.Helper()
	m, d := &cachev1alpha1.Memcached{}, &appsv1.StatefulSet{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(c.Get(context.Background(), key, m)).To(Succeed())
		g.Expect(m.Status.ObservedGeneration).To(Equal(m.Generation))
		g.Expect(meta.IsStatusConditionTrue(m.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue(), "Available")
		g.Expect(meta.IsStatusConditionFalse(m.Status.Conditions, cachev1alpha1.ConditionReconciling)).To(BeTrue(), "not Reconciling")
		g.Expect(m.Status.ReadyReplicas).To(Equal(size))
		g.Expect(c.Get(context.Background(), key, d)).To(Succeed())
		g.Expect(*d.Spec.Replicas).To(Equal(size))
		// The StatefulSet's controller done with it too: its status
		// written for the last time until something changes.
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(size))
		g.Expect(d.Status.Replicas).To(Equal(size))
		g.Expect(d.Status.ReadyReplicas).To(Equal(size))
		g.Expect(d.Status.AvailableReplicas).To(Equal(size))
		g.Expect(rolledOut(d)).To(BeTrue(), "rolled out")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return m, d
}

// rolledOut tells whether d's pods are all of its update revision: as its
// controller says once its rollout is complete, or, where the operator
// rolls the pods (OnDelete, whose currentRevision its controller never
// advances), as the pods' revisions say.
func rolledOut(d *appsv1.StatefulSet) bool {
	if d.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return d.Status.UpdatedReplicas == d.Status.Replicas
	}
	return d.Status.CurrentRevision == d.Status.UpdateRevision
}

// kstatusOf computes the Memcached's health as kstatus readers (Flux) see it.
func kstatusOf(t *testing.T, m *cachev1alpha1.Memcached) status.Status {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		t.Fatal(err)
	}
	res, err := status.Compute(&unstructured.Unstructured{Object: u})
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

// watchMemcached records every state of a Memcached seen through a watch
// until stop is called, returning those states.
func watchMemcached(t *testing.T, c client.WithWatch, key client.ObjectKey) (stop func() []cachev1alpha1.Memcached) {
	t.Helper()
	return startWatch(t, c, key).stop
}

// memcachedWatch records the states of a Memcached that a watch sees.
type memcachedWatch struct {
	w    watch.Interface
	done chan struct{}
	mu   sync.Mutex
	seen []cachev1alpha1.Memcached
}

// startWatch starts recording the states of the Memcached key; it stops
// when the test ends, if not before.
func startWatch(t *testing.T, c client.WithWatch, key client.ObjectKey) *memcachedWatch {
	t.Helper()
	w, err := c.Watch(context.Background(), &cachev1alpha1.MemcachedList{},
		client.InNamespace(key.Namespace), client.MatchingFields{"metadata.name": key.Name})
	if err != nil {
		t.Fatal(err)
	}
	mw := &memcachedWatch{w: w, done: make(chan struct{})}
	go func() {
		defer close(mw.done)
		for ev := range w.ResultChan() {
			if m, ok := ev.Object.(*cachev1alpha1.Memcached); ok {
				mw.mu.Lock()
				mw.seen = append(mw.seen, *m.DeepCopy())
				mw.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { mw.stop() })
	return mw
}

// soFar is what the watch has seen so far; it goes on.
func (mw *memcachedWatch) soFar() []cachev1alpha1.Memcached {
	mw.mu.Lock()
	defer mw.mu.Unlock()
	return slices.Clone(mw.seen)
}

// stop ends the watch and returns every state it saw.
func (mw *memcachedWatch) stop() []cachev1alpha1.Memcached {
	mw.w.Stop()
	<-mw.done
	return mw.soFar()
}

// columns parses `kubectl get` output into header -> value for its one row.
func columns(out string) map[string]string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		return nil
	}
	head, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	m := map[string]string{}
	for i := range head {
		if i < len(row) {
			m[head[i]] = row[i]
		}
	}
	return m
}

// readyAddresses are the addresses of the endpoints of s that are ready
// (an unknown state counts as ready, as the API says to read it).
func readyAddresses(s *discoveryv1.EndpointSlice) []string {
	var addrs []string
	for _, ep := range s.Endpoints {
		if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
			addrs = append(addrs, ep.Addresses...)
		}
	}
	return addrs
}

// rolloutRecord is a timeline of a Service's pods and EndpointSlices, as
// the watches of recordRollout saw them.
type rolloutRecord struct {
	// Timeline has one line per change, with the time it was seen.
	Timeline []string
	// FewestReady is the fewest ready addresses the Service's
	// EndpointSlices held together at any moment of the record.
	FewestReady int
}

// recordRollout watches the pods matching selector and the EndpointSlices
// of service in ns from their current state until stop is called: which
// pod turned ready or began to terminate, and which addresses the
// Service's slices held as ready after each change.
func recordRollout(t *testing.T, c client.WithWatch, ns, service string, selector map[string]string) (stop func() rolloutRecord) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := NewWithT(t)
	slices := &discoveryv1.EndpointSliceList{}
	bySlice := client.MatchingLabels{discoveryv1.LabelServiceName: service}
	g.Expect(c.List(ctx, slices, client.InNamespace(ns), bySlice)).To(Succeed())
	sliceWatch, err := c.Watch(ctx, &discoveryv1.EndpointSliceList{}, client.InNamespace(ns), bySlice,
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: slices.ResourceVersion}})
	g.Expect(err).NotTo(HaveOccurred())
	pods := &corev1.PodList{}
	g.Expect(c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(selector))).To(Succeed())
	podWatch, err := c.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns), client.MatchingLabels(selector),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: pods.ResourceVersion}})
	g.Expect(err).NotTo(HaveOccurred())
	// A test that fails before it calls stop still ends the watches.
	t.Cleanup(func() {
		sliceWatch.Stop()
		podWatch.Stop()
		cancel()
	})

	readyBySlice := map[string][]string{}
	readyCount := func() int {
		all := map[string]bool{}
		for _, addrs := range readyBySlice {
			for _, a := range addrs {
				all[a] = true
			}
		}
		return len(all)
	}
	for i := range slices.Items {
		readyBySlice[slices.Items[i].Name] = readyAddresses(&slices.Items[i])
	}
	podState := func(p *corev1.Pod) string {
		state := "not ready"
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				state = "ready"
			}
		}
		if p.DeletionTimestamp != nil {
			state += ", terminating"
		}
		return fmt.Sprintf("%s %s (%s)", p.Name, p.Status.PodIP, state)
	}
	lastPod := map[string]string{}
	for i := range pods.Items {
		lastPod[pods.Items[i].Name] = podState(&pods.Items[i])
	}

	rec := rolloutRecord{FewestReady: readyCount()}
	note := func(format string, args ...any) {
		rec.Timeline = append(rec.Timeline, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
	}
	note("start: %d ready addresses %v; pods %v", rec.FewestReady, readyBySlice, lastPod)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sliceEvents, podEvents := sliceWatch.ResultChan(), podWatch.ResultChan()
		for sliceEvents != nil || podEvents != nil {
			select {
			case ev, ok := <-sliceEvents:
				if !ok {
					sliceEvents = nil
					continue
				}
				s, isSlice := ev.Object.(*discoveryv1.EndpointSlice)
				if !isSlice {
					continue
				}
				if ev.Type == watch.Deleted {
					delete(readyBySlice, s.Name)
				} else {
					readyBySlice[s.Name] = readyAddresses(s)
				}
				n := readyCount()
				rec.FewestReady = min(rec.FewestReady, n)
				note("slice %s %s: ready %v; %d ready in all", s.Name, ev.Type, readyBySlice[s.Name], n)
			case ev, ok := <-podEvents:
				if !ok {
					podEvents = nil
					continue
				}
				p, isPod := ev.Object.(*corev1.Pod)
				if !isPod {
					continue
				}
				state := podState(p)
				if ev.Type == watch.Deleted {
					state = p.Name + " deleted"
				}
				if lastPod[p.Name] != state {
					lastPod[p.Name] = state
					note("pod %s", state)
				}
			}
		}
	}()
	return func() rolloutRecord {
		sliceWatch.Stop()
		podWatch.Stop()
		cancel()
		<-done
		return rec
	}
}

// atRest checks that the operator writes nothing for the converged
// Memcacheds of names in ns, though each is reconciled: it changes an
// annotation of each StatefulSet that the operator does not own (a
// reconcile with nothing to do, as a resync's would be: the operator runs
// with production's resync, none within a test), once every pod was told of
// its membership, sees that the operator
// reconciled them (its skipped StatefulSet applies rose by as many), and
// that in the following seconds nothing in ns changed but the nudge: not
// the Memcacheds, not what the operator makes for them, not their pods
// (the membership, the seal and the Secrets' digest the operator tells
// them of) nor the ConfigMaps (the membership), and that the operator
// recorded no event.
func atRest(t *testing.T, c client.Client, ns string, names ...string) {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	// Converged includes the pods told of the membership, which comes a
	// second or two after the ConfigMap's change (the kubelet's watch of
	// it catching up).
	for _, name := range names {
		toldOfMembership(t, c, client.ObjectKey{Namespace: ns, Name: name})
	}
	before := versionsAtRest(g, c, ns, names)
	skipped, err := operator.MetricSum("memcached_operator_applies_skipped_total", `kind="StatefulSet"`)
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range names {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.example.com/nudge":%q}}}`, time.Now().Format(time.RFC3339Nano))
		d := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		g.Expect(c.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
		before[fmt.Sprintf("%T %s", d, name)] = d.ResourceVersion
	}
	g.Eventually(func() (float64, error) {
		return operator.MetricSum("memcached_operator_applies_skipped_total", `kind="StatefulSet"`)
	}).WithTimeout(timeout).WithPolling(poll).Should(BeNumerically(">=", skipped+float64(len(names))),
		"every nudged StatefulSet's Memcached reconciled")
	time.Sleep(10 * time.Second)
	g.Expect(versionsAtRest(g, c, ns, names)).To(Equal(before), "no writes once converged, reconciles included")
}

// versionsAtRest are the resource versions of the Memcacheds of names in
// ns and of what the operator makes for them, of every pod and ConfigMap
// of ns, and the number of events the operator recorded there.
func versionsAtRest(g Gomega, c client.Client, ns string, names []string) map[string]string {
	ctx := context.Background()
	out := map[string]string{}
	for _, name := range names {
		key := client.ObjectKey{Namespace: ns, Name: name}
		for _, obj := range []client.Object{&cachev1alpha1.Memcached{}, &appsv1.StatefulSet{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}, &networkingv1.NetworkPolicy{}} {
			err := c.Get(ctx, key, obj)
			if apierrors.IsNotFound(err) {
				continue
			}
			g.Expect(err).NotTo(HaveOccurred())
			out[fmt.Sprintf("%T %s", obj, name)] = obj.GetResourceVersion()
		}
	}
	pods, configMaps := &corev1.PodList{}, &corev1.ConfigMapList{}
	g.Expect(c.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
	for _, p := range pods.Items {
		out["pod "+p.Name] = p.ResourceVersion
	}
	g.Expect(c.List(ctx, configMaps, client.InNamespace(ns))).To(Succeed())
	for _, cm := range configMaps.Items {
		out["ConfigMap "+cm.Name] = cm.ResourceVersion
	}
	events := &eventsv1.EventList{}
	g.Expect(c.List(ctx, events, client.InNamespace(ns))).To(Succeed())
	n := 0
	for _, e := range events.Items {
		if e.ReportingController == "memcached-operator" {
			n++
		}
	}
	out["events"] = fmt.Sprint(n)
	return out
}

// builtBeside waits, under make test, for the lane beside the suite to
// have built what a story needs and only it needs (hack/test.sh: the file
// what in the folder $BUILT_BESIDE, or what.failed): "helm", Helm;
// "scorecard", operator-sdk and the scorecard's images. Outside make test
// the target that runs the suite built them first.
func builtBeside(t *testing.T, what string) {
	t.Helper()
	dir := os.Getenv("BUILT_BESIDE")
	if dir == "" {
		return
	}
	ready := filepath.Join(dir, what)
	deadline := time.Now().Add(20 * time.Minute)
	for {
		if _, err := os.Stat(ready); err == nil {
			return
		}
		if _, err := os.Stat(ready + ".failed"); err == nil {
			t.Fatalf("the lane beside the suite failed to build %s: see its log", what)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lane beside the suite did not build %s within 20 minutes (no %s)", what, ready)
		}
		time.Sleep(time.Second)
	}
}
