//go:build integration

package memcached_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	cacheac "github.com/example/memcached-operator/applyconfig/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/controller/memcached"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/status"
)

// The store keeps summaries, and the digests it computes from the managed
// fields the apiserver recorded match what the operator would apply to a
// converged Memcached: the fields and their values, and the field paths, of
// each object; and so does the status computed from them. The manager's
// cache holds Memcacheds whole, and hands out no owned object at all.
func TestStoreHoldsSummariesThatMatchWhatWasApplied(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{
		Size: ptr.To[int32](2), Threads: ptr.To[int32](2), MaxConnections: ptr.To[int32](512),
		Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.1")}},
	})
	converged(t, m)

	store, c := startStoreAndCache(t, ctx, m)
	key := client.ObjectKeyFromObject(m)

	got := &cachev1alpha1.Memcached{}
	g.Expect(c.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.Status.Conditions).To(HaveEach(HaveField("Message", Not(BeEmpty()))), "the Memcached is cached whole")
	g.Expect(got.ManagedFields).To(ConsistOf(HaveField("Manager", owned.StatusFieldManager)), "but for other managers' entries")

	dep, found, err := store.Get(owned.KindStatefulSet, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(dep.Status.ReadyReplicas).To(Equal(int32(2)), "the Deployment's status is kept")
	svc, _, err := store.Get(owned.KindService, key)
	g.Expect(err).NotTo(HaveOccurred())
	pdb, _, err := store.Get(owned.KindPodDisruptionBudget, key)
	g.Expect(err).NotTo(HaveOccurred())

	for _, tt := range []struct {
		s    *owned.Summary
		want runtime.ApplyConfiguration
	}{
		{dep, desired.StatefulSet(got, testenv.Images, desired.SecretDigests{})},
		{svc, desired.Service(got, false)},
		{pdb, desired.PodDisruptionBudget(got)},
	} {
		g.Expect(tt.s).NotTo(BeNil())
		nothing, err := tt.s.AppliesNothing(tt.want)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nothing).To(BeTrue(), "%s: applying it again would change nothing", tt.s.Kind())
		exactly, err := tt.s.OwnsExactly(tt.want, owned.BuiltinSchemas())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(exactly).To(BeTrue(), "%s: the operator owns exactly the fields it applies", tt.s.Kind())
	}

	pods, err := store.Pods(ns, dep.UID)
	g.Expect(err).NotTo(HaveOccurred())
	membership, _, err := store.Get(owned.KindConfigMap, client.ObjectKey{Namespace: ns, Name: desired.MembershipName(m.Name)})
	g.Expect(err).NotTo(HaveOccurred())
	st := status.Status(got, status.Observation{StatefulSet: dep, Service: svc, Pods: pods, Discovery: membership != nil, Image: testenv.Images.Image(got)}, metav1.Now())
	nothing, err := owned.StatusAppliesNothing(got, cacheac.Memcached(got.Name, got.Namespace).WithStatus(st))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nothing).To(BeTrue(), "the status computed from summaries is the one recorded")

	changed := got.DeepCopy()
	changed.Spec.Threads = ptr.To[int32](4)
	nothing, err = dep.AppliesNothing(desired.StatefulSet(changed, testenv.Images, desired.SecretDigests{}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nothing).To(BeFalse(), "a spec change is seen")

	err = c.Get(ctx, key, &appsv1.StatefulSet{})
	g.Expect(errors.As(err, new(*cache.ErrResourceNotCached))).To(BeTrue(), "the manager's cache hands out no Deployment: %v", err)
}

// startStoreAndCache starts, until ctx ends, a store of the owned objects
// and a cache of the Memcacheds of m's namespace, as the operator's, and
// waits until the store lists m's StatefulSet, Service and budget.
func startStoreAndCache(t *testing.T, ctx context.Context, m *cachev1alpha1.Memcached) (*owned.Store, cache.Cache) {
	g := NewWithT(t)
	ns := m.Namespace
	hc, err := rest.HTTPClientFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	store, err := owned.NewStore(cfg, hc, []string{ns}, memcached.OwnSelector, memcached.OthersSelector, 0, owned.BuiltinSchemas())
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = store.Start(ctx) }()
	c, err := cache.New(cfg, memcached.CacheOptions(cache.Options{Scheme: testenv.Scheme}, []string{ns}))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.GetInformer(ctx, &cachev1alpha1.Memcached{}) // as the controller's watch does
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = c.Start(ctx) }()
	g.Expect(c.WaitForCacheSync(ctx)).To(BeTrue())
	key := client.ObjectKeyFromObject(m)
	for _, k := range []owned.Kind{owned.KindStatefulSet, owned.KindService, owned.KindPodDisruptionBudget} {
		g.Eventually(func() (bool, error) {
			_, found, err := store.Get(k, key)
			return found, err
		}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "the store lists the %s", k)
	}
	return store, c
}
