//go:build integration

package manifests_test

import (
	"context"
	"net/http"
	"regexp"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

// watchedNamespace is the namespace manifests/namespaced scopes the operator to.
const watchedNamespace = "memcached"

// clusterWide matches a request for one of the operator's kinds across all
// namespaces: a list or watch that would put every namespace in its cache.
var clusterWide = regexp.MustCompile(`^/apis?/(apps/v1/deployments|v1/services|policy/v1/poddisruptionbudgets|networking\.k8s\.io/v1/networkpolicies|cache\.example\.com/v1alpha1/memcacheds)$`)

// TestNamespacedInstallWatchesOnlyItsNamespace installs manifests/namespaced
// and runs the operator as its ServiceAccount with only that overlay's
// roles and --watch-namespaces=memcached: it reconciles a Memcached in that
// namespace, and neither touches nor caches one in another.
func TestNamespacedInstallWatchesOnlyItsNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	install(t, "namespaced")
	// The cluster-wide bundle, when an earlier test installed it, bound the
	// same ServiceAccount to a ClusterRole: remove that, so that only the
	// overlay's Role grants anything.
	for _, obj := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "memcached-operator-manager"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "memcached-operator-manager"}},
	} {
		g.Expect(client.IgnoreNotFound(k8s.Delete(ctx, obj))).To(Succeed())
	}

	other := testenv.Namespace(t, k8s)
	outside := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: other}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}}
	g.Expect(k8s.Create(ctx, outside)).To(Succeed())

	sa := serviceAccountConfig(t)
	requests := &testenv.Requests{}
	startOperator(t, requests.Wrap(sa), testenv.OperatorOptions{
		LeaderElectionNamespace: operatorNamespace,
		WatchNamespaces:         []string{watchedNamespace},
	})

	inside := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: watchedNamespace}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}}
	g.Expect(k8s.Create(ctx, inside)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), inside) })
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(inside), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue())
		g.Expect(got.Status.ReadyReplicas).To(Equal(int32(2)))
		g.Expect(got.Status.Service).NotTo(BeNil())
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(inside), &policyv1.PodDisruptionBudget{})).To(Succeed())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// The Memcached of the other namespace: no status, no objects.
	got := &cachev1alpha1.Memcached{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(outside), got)).To(Succeed())
	g.Expect(got.Status.Conditions).To(BeEmpty(), "not touched")
	for _, obj := range []client.Object{&appsv1.StatefulSet{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(outside), obj)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T in %s: %v", obj, other, err)
	}
	// Nothing asked about it, and nothing listed or watched beyond the watched namespace.
	g.Expect(requests.Since(0, testenv.PathContains("/namespaces/"+other+"/"))).To(BeEmpty())
	g.Expect(requests.Since(0, func(r testenv.Request) bool { return clusterWide.MatchString(r.Path) })).To(BeEmpty(), "not cached cluster-wide")
	g.Expect(requests.Since(0, func(r testenv.Request) bool { return r.Code == http.StatusForbidden })).To(BeEmpty(), "the overlay's roles suffice")

	// And the roles grant nothing cluster-wide.
	c, err := client.New(sa, client.Options{Scheme: testenv.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apierrors.IsForbidden(c.List(ctx, &cachev1alpha1.MemcachedList{}))).To(BeTrue(), "listing Memcacheds of all namespaces")
	g.Expect(apierrors.IsForbidden(c.List(ctx, &appsv1.StatefulSetList{}, client.InNamespace(other)))).To(BeTrue(), "listing StatefulSets of another namespace")
}
