//go:build e2e

package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// A user creates a cache, scales it two ways, changes its image and deletes it.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	var ns string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "cache"} }

	f := features.New("lifecycle").WithLabel("story", "lifecycle").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns = namespace(t, cfg, "lifecycle")
			return ctx
		}).
		Assess("a new Memcached becomes Available with a rolled-out StatefulSet of stable slots", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}}
			g.Expect(c.Create(ctx, m)).To(Succeed())
			_, d := converged(t, c, key(), 2)
			g.Expect(d.Status.AvailableReplicas).To(Equal(int32(2)))
			for _, slot := range []string{"cache-0", "cache-1"} {
				p := &corev1.Pod{}
				g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: slot}, p)).To(Succeed(), "slot %s", slot)
				g.Expect(p.Spec.Hostname).To(Equal(slot))
				g.Expect(p.Spec.Subdomain).To(Equal("cache"), "named under the headless Service: %s.cache.%s.svc", slot, ns)
			}

			out, err := kubectl(ctx, cfg, "", "get", "memcached", "cache", "-n", ns)
			g.Expect(err).NotTo(HaveOccurred())
			cols := columns(out)
			g.Expect(cols).To(HaveKeyWithValue("DESIRED", "2"))
			g.Expect(cols).To(HaveKeyWithValue("READY", "2"))
			g.Expect(cols).To(HaveKeyWithValue("AVAILABLE", "True"))
			g.Expect(cols).To(HaveKey("AGE"))
			out, err = kubectl(ctx, cfg, "", "get", "mc", "cache", "-n", ns, "-o", "wide")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(columns(out)).To(HaveKeyWithValue("REASON", cachev1alpha1.ReasonMinimumReplicasAvailable))
			return ctx
		}).
		Assess("scaling through the spec", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := kube(t, cfg)
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}}
			NewWithT(t).Expect(c.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":3}}`)))).To(Succeed())
			converged(t, c, key(), 3)
			return ctx
		}).
		Assess("scaling with kubectl scale memcached", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			_, err := kubectl(ctx, cfg, "", "scale", "memcached/cache", "-n", ns, "--replicas=1")
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			m, _ := converged(t, kube(t, cfg), key(), 1)
			NewWithT(t).Expect(*m.Spec.Size).To(Equal(int32(1)))
			return ctx
		}).
		Assess("changing the image rolls out: in progress, then Available", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			stop := watchMemcached(t, c, key())
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}}
			const image = "memcached:1.6.38-alpine"
			g.Expect(c.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"image":"`+image+`"}}`)))).To(Succeed())
			_, d := converged(t, c, key(), 1)
			seen := stop()
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
			// The status may be written once, at the rollout's end: until
			// then the stale observedGeneration is what says "in progress".
			inProgress := false
			for i, s := range seen {
				if s.Generation < m.Generation {
					continue
				}
				switch kstatusOf(t, &seen[i]) {
				case kstatus.InProgressStatus:
					inProgress = true
				case kstatus.CurrentStatus:
					g.Expect(s.Status.Image).To(Equal(image), "current only once rolled out")
					g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue())
				}
			}
			g.Expect(inProgress).To(BeTrue(), "the new generation read as in progress during the rollout")
			return ctx
		}).
		Assess("deleting the Memcached garbage-collects its StatefulSet and pods", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			g.Expect(c.Delete(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}})).To(Succeed())
			g.Eventually(func(g Gomega) {
				g.Expect(apierrors.IsNotFound(c.Get(ctx, key(), &appsv1.StatefulSet{}))).To(BeTrue())
				pods := &corev1.PodList{}
				g.Expect(c.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
				g.Expect(pods.Items).To(BeEmpty())
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
