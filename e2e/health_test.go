//go:build e2e

package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// GitOps tools judge health with kstatus and kubectl wait.
func TestHealthAsGitOpsToolsSeeIt(t *testing.T) {
	t.Parallel()
	var ns string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "cache"} }

	f := features.New("health").WithLabel("story", "health").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns = namespace(t, cfg, "health")
			return ctx
		}).
		Assess("kubectl wait --for=condition=Available returns once the cache is up", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}}
			g.Expect(c.Create(ctx, m)).To(Succeed())
			out, err := kubectl(ctx, cfg, "", "wait", "-n", ns, "--for=condition=Available", "--timeout=2m", "memcached/cache")
			g.Expect(err).NotTo(HaveOccurred(), out)
			return ctx
		}).
		Assess("kstatus says Current once converged", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			m, _ := converged(t, kube(t, cfg), key(), 2)
			NewWithT(t).Expect(kstatusOf(t, m)).To(Equal(status.CurrentStatus))
			return ctx
		}).
		Assess("kstatus says InProgress during a rollout, then Current", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			stop := watchMemcached(t, c, key())
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}}
			g.Expect(c.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":4,"threads":2}}`)))).To(Succeed())
			m, _ = converged(t, c, key(), 4)
			seen := stop()
			var states []status.Status
			for i := range seen {
				states = append(states, kstatusOf(t, &seen[i]))
			}
			g.Expect(states).To(ContainElement(status.InProgressStatus))
			g.Expect(states).NotTo(ContainElement(status.FailedStatus))
			g.Expect(kstatusOf(t, m)).To(Equal(status.CurrentStatus))
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
