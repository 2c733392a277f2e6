//go:build integration

package manifests_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/internal/testsupport/tutorial"
	"github.com/example/memcached-operator/pkg/desired"
)

// replaceCRDWithTutorials puts the tutorial's Memcached CRD in place of
// this project's (every Memcached goes with the old one), as `make install`
// of the tutorial does; the project's is back after the test.
func replaceCRDWithTutorials(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	deleteCRD := func() {
		if out, err := kubectl(t, nil, "delete", "crd", "memcacheds.cache.example.com", "--ignore-not-found", "--wait=true", "--timeout=120s"); err != nil {
			t.Fatalf("deleting the CRD: %v\n%s", err, out)
		}
	}
	deleteCRD()
	if out, err := kubectl(t, tutorial.CRD, "apply", "-f", "-"); err != nil {
		t.Fatalf("applying the tutorial's CRD: %v\n%s", err, out)
	}
	if err := repo.WaitForCRDs(context.Background(), cluster.Kubeconfig, "crd/memcacheds.cache.example.com"); err != nil {
		t.Fatalf("waiting for the CRD: %v", err)
	}
	// Discovery serves a new CRD a moment after it is Established.
	NewWithT(t).Eventually(func() error {
		return k8s.List(ctx, &cachev1alpha1.MemcachedList{}, client.InNamespace("default"))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	t.Cleanup(func() {
		// A failed takeover may leave the tutorial's finalizer, which
		// would hold the CRD's deletion.
		list := &cachev1alpha1.MemcachedList{}
		if err := k8s.List(ctx, list); err == nil {
			for i := range list.Items {
				if len(list.Items[i].Finalizers) > 0 {
					_ = k8s.Patch(ctx, &list.Items[i], client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
				}
			}
		}
		deleteCRD()
		install(t, "default")
	})
}

// Two Memcacheds served by the Operator SDK tutorial's operator (its CRD,
// finalizer, Deployments sharing one selector, status written by Update)
// are taken over: this project's CRD replaces the tutorial's and keeps
// them; the operator, running as its ServiceAccount with the bundle's
// role, replaces each Deployment by a StatefulSet without a moment with
// fewer ready pods than the Memcached's size (the Deployment is deleted
// once every slot is ready), says so in an event and in Progressing, folds
// the tutorial's status field manager into its own, removes its
// finalizer; afterwards each Memcached's pods are its own StatefulSet's
// slots, selected by its Service only, `kubectl scale` works, and deletion
// is not held by the old finalizer.
func TestTakeOverFromTheTutorialOperator(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	install(t, "default")
	replaceCRDWithTutorials(t)
	ns := testenv.Namespace(t, k8s)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := kubectl(t, nil, "get", "memcached,deploy,rs,pods", "-n", ns, "-o", "wide")
			t.Logf("namespace %s:\n%s", ns, out)
			out, _ = kubectl(t, nil, "get", "memcached", "-n", ns, "-o", "yaml")
			t.Logf("%s", out)
		}
	})
	const image = "memcached:1.6.26-alpine3.19"
	sizes := map[string]int32{"small": 1, "large": 2}

	// The tutorial's era: a user applies Memcacheds, its operator serves them.
	for name, size := range sizes {
		manifest := fmt.Sprintf("apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: %s, namespace: %s}\nspec: {size: %d, containerPort: 11211}\n", name, ns, size)
		out, err := kubectl(t, []byte(manifest), "apply", "-f", "-")
		g.Expect(err).NotTo(HaveOccurred(), out)
		m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		_, err = tutorial.Reconcile(ctx, k8s, m, image)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Eventually(func(g Gomega) {
		for name, size := range sizes {
			d := &appsv1.Deployment{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d)).To(Succeed())
			g.Expect(d.Status.ReadyReplicas).To(Equal(size), name)
		}
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	pods := &corev1.PodList{}
	g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(tutorial.Labels(image)))).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(3), "the tutorial's defect: each Deployment's selector matches the other's pods too")

	// Another controller keeps a condition of its own on one of them, as
	// controllers did under the tutorial's CRD: read-modify-write.
	backedUp := &cachev1alpha1.Memcached{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "large"}, backedUp)).To(Succeed())
	meta.SetStatusCondition(&backedUp.Status.Conditions, metav1.Condition{Type: "BackedUp", Status: metav1.ConditionTrue, Reason: "Nightly", Message: "backed up"})
	g.Expect(k8s.Status().Update(ctx, backedUp, client.FieldOwner("backup-controller"))).To(Succeed())

	// A third Memcached whose Deployment, made by the same field manager,
	// selects its pods by the labels this operator's Deployments did: it is
	// another operator's all the same (this one never applied it).
	manifest := fmt.Sprintf("apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: matching, namespace: %s}\nspec: {size: 1, containerPort: 11211}\n", ns)
	out, err := kubectl(t, []byte(manifest), "apply", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)
	matching := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "matching"}}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(matching), matching)).To(Succeed())
	inPlace := tutorial.Deployment(matching, image)
	inPlace.Spec.Selector.MatchLabels = desired.LegacySelectorLabels(matching)
	inPlace.Spec.Template.Labels = desired.LegacySelectorLabels(matching)
	g.Expect(tutorial.ReconcileWith(ctx, k8s, matching, inPlace)).To(Succeed())

	// A Memcached the tutorial admitted and this project's CRD would not
	// (a dot in its name: it cannot name a Service).
	manifest = fmt.Sprintf("apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: cache.v1, namespace: %s}\nspec: {size: 1, containerPort: 11211}\n", ns)
	out, err = kubectl(t, []byte(manifest), "apply", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)
	_, err = tutorial.Reconcile(ctx, k8s, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache.v1"}}, image)
	g.Expect(err).NotTo(HaveOccurred())

	// This project's CRD replaces the tutorial's, as docs/migrating.md says.
	out, err = kubectl(t, nil, "apply", "--server-side", "--force-conflicts", "--field-manager=installer", "-f", repo.Path("manifests", "crd", "bases", "cache.example.com_memcacheds.yaml"))
	g.Expect(err).NotTo(HaveOccurred(), out)
	install(t, "default")
	out, err = kubectl(t, nil, "get", "memcached", "-n", ns, "-o", "wide")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("DESIRED"), "the project's printer columns")
	g.Expect(out).To(ContainSubstring("large"))

	// Ready pods per Memcached, sampled every 50 ms from before the
	// operator starts until the end.
	var mu sync.Mutex
	lowest := map[string]int{}
	samples := 0
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			list := &corev1.PodList{}
			if err := k8s.List(sampleCtx, list, client.InNamespace(ns)); err == nil {
				mu.Lock()
				for name := range sizes {
					n := len(tutorial.ReadyPods(list.Items, name))
					if l, ok := lowest[name]; !ok || n < l {
						lowest[name] = n
					}
				}
				samples++
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	// Installed as it comes, the operator may not take over: it leaves the
	// tutorial's Deployments exactly as they are, pods serving, and each
	// Memcached's status says what it needs (the flag and its role).
	cfg := serviceAccountConfig(t)
	untouched := map[string]string{}
	for _, name := range []string{"small", "large", "matching"} {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d)).To(Succeed())
		untouched[name] = d.ResourceVersion
	}
	stop := startOperator(t, cfg, testenv.OperatorOptions{LeaderElectionNamespace: operatorNamespace})
	for name, rv := range untouched {
		g.Eventually(func(g Gomega) {
			m := &cachev1alpha1.Memcached{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, m)).To(Succeed())
			c := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionDegraded)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonTakeOverDisabled))
			g.Expect(c.Message).To(ContainSubstring("--take-over"))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), name)
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d)).To(Succeed())
		g.Expect(d.ResourceVersion).To(Equal(rv), "%s: Deployment left as it was", name)
	}
	stop()

	// With the takeover component: its role, and --take-over.
	installTakeOver(t)
	startOperator(t, cfg, testenv.OperatorOptions{LeaderElectionNamespace: operatorNamespace, TakeOver: true})

	sizes["matching"] = 1
	for name, size := range sizes {
		key := client.ObjectKey{Namespace: ns, Name: name}
		g.Eventually(func(g Gomega) {
			m := &cachev1alpha1.Memcached{}
			g.Expect(k8s.Get(ctx, key, m)).To(Succeed())
			g.Expect(m.Status.ObservedGeneration).To(Equal(m.Generation))
			g.Expect(meta.IsStatusConditionTrue(m.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue())
			g.Expect(meta.IsStatusConditionFalse(m.Status.Conditions, cachev1alpha1.ConditionProgressing)).To(BeTrue(), "rolled over")
			set := &appsv1.StatefulSet{}
			g.Expect(k8s.Get(ctx, key, set)).To(Succeed())
			g.Expect(set.Spec.Selector.MatchLabels).To(Equal(desired.SelectorLabels(m)))
			g.Expect(set.Status.Replicas).To(Equal(size))
			g.Expect(set.Status.UpdatedReplicas).To(Equal(size))
			g.Expect(set.Status.ReadyReplicas).To(Equal(size))
			g.Expect(apierrors.IsNotFound(k8s.Get(ctx, key, &appsv1.Deployment{}))).To(BeTrue(), "the tutorial's Deployment is deleted")
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			for _, p := range pods.Items {
				ref := metav1.GetControllerOf(&p)
				g.Expect(ref == nil || ref.Kind != "ReplicaSet" || !strings.HasPrefix(ref.Name, name+"-")).To(BeTrue(), "no pod of the replaced Deployment left: %s", p.Name)
			}
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), name)
	}
	delete(sizes, "matching")
	stopSampling()
	<-sampled
	mu.Lock()
	t.Logf("%d samples; fewest ready pods: %v", samples, lowest)
	for name, size := range sizes {
		g.Expect(lowest[name]).To(BeNumerically(">=", size), "%s never had fewer ready pods than its size", name)
	}
	mu.Unlock()

	for name, size := range sizes {
		key := client.ObjectKey{Namespace: ns, Name: name}
		m := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, key, m)).To(Succeed())
		g.Expect(m.Finalizers).NotTo(ContainElement(tutorial.Finalizer))
		for _, e := range m.ManagedFields {
			g.Expect(e.Manager).NotTo(Equal(tutorial.FieldManager), "%s: the tutorial's field manager is folded into the operator's: %+v", name, e)
		}
		if name == "large" {
			g.Expect(meta.FindStatusCondition(m.Status.Conditions, "BackedUp")).NotTo(BeNil(), "another controller's condition stays")
			g.Expect(m.ManagedFields).To(ContainElement(HaveField("Manager", "backup-controller")), "and so does its field manager")
		}
		events := &eventsv1.EventList{}
		g.Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(
			HaveField("Reason", "ReplacingDeployment"),
			HaveField("Regarding.Name", name),
			HaveField("Note", ContainSubstring("is being replaced by StatefulSet "+name)),
		)))

		// Each Memcached's pods are its own StatefulSet's and Service's only.
		g.Eventually(func(g Gomega) {
			slices := &discoveryv1.EndpointSliceList{}
			g.Expect(k8s.List(ctx, slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name})).To(Succeed())
			var targets []string
			for _, s := range slices.Items {
				for _, e := range s.Endpoints {
					if e.TargetRef != nil {
						targets = append(targets, e.TargetRef.Name)
					}
				}
			}
			g.Expect(targets).To(HaveLen(int(size)))
			for _, p := range targets {
				pod := &corev1.Pod{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: p}, pod)).To(Succeed())
				g.Expect(pod.Labels).To(HaveKeyWithValue(desired.LabelMemcached, name))
				g.Expect(pod.Name).To(HavePrefix(name+"-"), "a slot of the StatefulSet")
			}
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	}

	// The Memcached the new schema would refuse stays, is served, and
	// reports what cannot be made for it.
	g.Eventually(func(g Gomega) {
		m := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cache.v1"}, m)).To(Succeed())
		c := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionDegraded)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonApplyFailed))
		g.Expect(c.Message).To(ContainSubstring("Service"))
		g.Expect(meta.IsStatusConditionTrue(m.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue(), "its pods serve")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// kubectl scale takes effect.
	out, err = kubectl(t, nil, "scale", "-n", ns, "memcached/small", "--replicas=3")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Eventually(func(g Gomega) {
		d := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "small"}, d)).To(Succeed())
		g.Expect(d.Status.ReadyReplicas).To(Equal(int32(3)))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// Deleting a Memcached is no longer held by the tutorial's finalizer.
	g.Expect(k8s.Delete(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "large"}})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "large"}, &cachev1alpha1.Memcached{}))
	}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue())
}
