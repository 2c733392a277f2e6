package memcached_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	cacheac "github.com/example/memcached-operator/applyconfig/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testenv"
	"github.com/example/memcached-operator/pkg/controller/memcached"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/status"
)

// The operator's cache keeps summaries, and the digests it computes from the
// managed fields the apiserver recorded match what the operator would
// apply to a converged Memcached: the fields and their values, and the field
// paths, of each object and of the status.
func TestCacheHoldsSummariesThatMatchWhatWasApplied(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{
		Size: ptr.To[int32](2), Threads: ptr.To[int32](2), MaxConnections: ptr.To[int32](512),
		Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.1")}},
	})
	converged(t, m)

	c, err := cache.New(cfg, memcached.CacheOptions(cache.Options{Scheme: testenv.Scheme}, []string{ns}))
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = c.Start(ctx) }()
	g.Expect(c.WaitForCacheSync(ctx)).To(BeTrue())
	key := client.ObjectKeyFromObject(m)

	got := &cachev1alpha1.Memcached{}
	dep := &appsv1.Deployment{}
	svc := &corev1.Service{}
	pdb := &policyv1.PodDisruptionBudget{}
	for _, obj := range []client.Object{got, dep, svc, pdb} {
		g.Expect(c.Get(ctx, key, obj)).To(Succeed())
		g.Expect(obj.GetManagedFields()).To(HaveEach(HaveField("FieldsV1", BeNil())), "%T: no field sets in the cache", obj)
		g.Expect(obj.GetLabels()).To(BeEmpty(), "%T: a summary", obj)
	}
	g.Expect(dep.Spec.Template.Spec.Containers).To(BeEmpty(), "no pod template in the cache")
	g.Expect(dep.Status.ReadyReplicas).To(Equal(int32(2)), "the Deployment's status is kept")

	for _, tt := range []struct {
		obj  client.Object
		want runtime.ApplyConfiguration
	}{
		{dep, desired.Deployment(got, testenv.DefaultImage)},
		{svc, desired.Service(got)},
		{pdb, desired.PodDisruptionBudget(got)},
	} {
		nothing, err := memcached.AppliesNothing(tt.obj, tt.want)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nothing).To(BeTrue(), "%T: applying it again would change nothing", tt.obj)
		exactly, err := memcached.OwnsExactly(tt.obj, tt.want)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(exactly).To(BeTrue(), "%T: the operator owns exactly the fields it applies", tt.obj)
	}

	st := status.Status(got, status.Observation{Deployment: dep, Service: svc}, metav1.Now())
	nothing, err := memcached.AppliesNothing(got, cacheac.Memcached(got.Name, got.Namespace).WithStatus(st))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nothing).To(BeTrue(), "the status computed from summaries is the one recorded")

	changed := got.DeepCopy()
	changed.Spec.Threads = ptr.To[int32](4)
	nothing, err = memcached.AppliesNothing(dep, desired.Deployment(changed, testenv.DefaultImage))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nothing).To(BeFalse(), "a spec change is seen")
}
