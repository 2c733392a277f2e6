//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	cacheac "github.com/example/memcached-operator/applyconfig/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/podtemplate"
	"github.com/example/memcached-operator/pkg/desired"
)

// GitOps tools apply the Memcached spec with server-side apply, again and
// again, each its own Memcached and both a shared one, while the operator
// writes status, an autoscaler owns spec.size through the scale
// subresource, and a policy tool labels the StatefulSet. Nobody conflicts
// and nobody's fields move.
func TestGitOpsCoOwnership(t *testing.T) {
	t.Parallel()
	var ns string
	appliers := []string{"argocd-controller", "kustomize-controller"}
	// shared is applied by both appliers, with the same intent.
	const shared = "shared"
	names := append(append([]string{}, appliers...), shared)
	spec := func(threads int32) *cacheac.MemcachedSpecApplyConfiguration {
		// size is left out: the autoscaler owns it.
		return cacheac.MemcachedSpec().WithImage(desired.DefaultImage).WithMemoryLimitMiB(64).WithThreads(threads)
	}

	f := features.New("gitops co-ownership").WithLabel("story", "gitops").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns = namespace(t, cfg, "gitops")
			return ctx
		}).
		Assess("appliers, an autoscaler and the operator never conflict", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			for round := range 6 {
				for _, manager := range appliers {
					for _, name := range []string{manager, shared} {
						ac := cacheac.Memcached(name, ns).WithSpec(spec(2))
						// No force: a conflict with the operator or the other
						// applier would be an error here.
						g.Expect(c.Apply(ctx, ac, client.FieldOwner(manager))).To(Succeed(), "round %d, %s applying %s", round, manager, name)
					}
				}
				if round == 2 {
					// The autoscaler scales every cache through the scale subresource.
					for _, name := range names {
						scale := &autoscalingv1.Scale{}
						m := &cachev1alpha1.Memcached{}
						m.Name, m.Namespace = name, ns
						g.Expect(c.SubResource("scale").Get(ctx, m, scale)).To(Succeed())
						scale.Spec.Replicas = 3
						g.Expect(c.SubResource("scale").Update(ctx, m, client.WithSubResourceBody(scale), client.FieldOwner("horizontal-pod-autoscaler"))).To(Succeed())
					}
				}
				time.Sleep(500 * time.Millisecond)
			}
			for _, name := range names {
				m, _ := converged(t, c, client.ObjectKey{Namespace: ns, Name: name}, 3)
				// Each applier sees no drift: what it owns is what it applied.
				for _, manager := range appliers {
					if name != manager && name != shared {
						continue
					}
					owned, err := cacheac.ExtractMemcached(m, manager)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(owned.Spec).NotTo(BeNil(), "%s owns its fields of %s", manager, name)
					g.Expect(toJSON(t, owned.Spec)).To(MatchJSON(toJSON(t, spec(2))), "%s's fields of %s", manager, name)
				}
				g.Expect(*m.Spec.Size).To(Equal(int32(3)), "the autoscaler's size stands")
			}
			return ctx
		}).
		Assess("once converged, nothing changes: not the Memcacheds, not what the operator made", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			for _, name := range names {
				converged(t, c, client.ObjectKey{Namespace: ns, Name: name}, 3)
			}
			// The appliers re-apply the same intent, as Argo CD and Flux
			// do on every sync, and each Memcached is reconciled: nothing
			// changes.
			for _, manager := range appliers {
				for _, name := range []string{manager, shared} {
					g.Expect(c.Apply(ctx, cacheac.Memcached(name, ns).WithSpec(spec(2)), client.FieldOwner(manager))).To(Succeed())
				}
			}
			atRest(t, c, ns, names...)
			return ctx
		}).
		Assess("a third manager's labels and annotations on the StatefulSet survive", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			name := appliers[0]
			policy := appsv1ac.StatefulSet(name, ns).
				WithLabels(map[string]string{"cost-center": "42"}).
				WithAnnotations(map[string]string{"policy.example.com/checked": "true"})
			g.Expect(c.Apply(ctx, policy, client.FieldOwner("policy-controller"))).To(Succeed())
			// A spec change makes the operator apply the StatefulSet again.
			g.Expect(c.Apply(ctx, cacheac.Memcached(name, ns).WithSpec(spec(4)), client.FieldOwner(name))).To(Succeed())
			_, d := converged(t, c, client.ObjectKey{Namespace: ns, Name: name}, 3)
			g.Expect(podtemplate.MemcachedFlags(d.Spec.Template)).To(ContainElement("--threads=4"))
			g.Expect(d.Labels).To(HaveKeyWithValue("cost-center", "42"))
			g.Expect(d.Annotations).To(HaveKeyWithValue("policy.example.com/checked", "true"))
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
