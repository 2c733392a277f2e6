//go:build e2e

package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
)

// A person changes the StatefulSet by hand: the operator puts back what it
// owns and keeps what it does not.
func TestDrift(t *testing.T) {
	t.Parallel()
	var ns string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "cache"} }

	f := features.New("drift").WithLabel("story", "drift").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns = namespace(t, cfg, "drift")
			c := kube(t, cfg)
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}}
			NewWithT(t).Expect(c.Create(ctx, m)).To(Succeed())
			converged(t, c, key(), 2)
			return ctx
		}).
		Assess("kubectl scale statefulset is undone", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g := NewWithT(t)
			_, err := kubectl(ctx, cfg, "", "scale", "statefulset/cache", "-n", ns, "--replicas=5")
			g.Expect(err).NotTo(HaveOccurred())
			converged(t, kube(t, cfg), key(), 2)
			out, err := kubectl(ctx, cfg, "", "get", "events.events.k8s.io", "-n", ns, "-o", "jsonpath={.items[*].note}")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(ContainSubstring("Restored fields of StatefulSet cache changed by [kubectl"))
			return ctx
		}).
		Assess("an edited image is restored, a hand-made label and setting stay", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g := NewWithT(t)
			_, err := kubectl(ctx, cfg, "", "set", "image", "statefulset/cache", "-n", ns, "memcached=memcached:hand-picked")
			g.Expect(err).NotTo(HaveOccurred())
			_, err = kubectl(ctx, cfg, "", "label", "statefulset/cache", "-n", ns, "owner=alice")
			g.Expect(err).NotTo(HaveOccurred())
			_, err = kubectl(ctx, cfg, "", "patch", "statefulset/cache", "-n", ns, "--type=merge", "-p", `{"spec":{"persistentVolumeClaimRetentionPolicy":{"whenDeleted":"Delete"}}}`)
			g.Expect(err).NotTo(HaveOccurred())
			g.Eventually(func(g Gomega) {
				_, d := converged(t, kube(t, cfg), key(), 2)
				g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(desired.DefaultImage))
				g.Expect(d.Labels).To(HaveKeyWithValue("owner", "alice"))
				// A setting a StatefulSet lets change on every version
				// claimed (revisionHistoryLimit only from 1.31).
				g.Expect(d.Spec.PersistentVolumeClaimRetentionPolicy).NotTo(BeNil())
				g.Expect(d.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted).To(Equal(appsv1.DeletePersistentVolumeClaimRetentionPolicyType))
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
