//go:build integration

package memcached_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/rest"
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
