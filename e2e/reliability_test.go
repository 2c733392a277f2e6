//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	operatorpkg "github.com/example/memcached-operator/pkg/operator"
)

// The operator is killed mid-rollout and restarted, then runs as two
// replicas with leader election and loses its leader. It converges every
// time, without duplicates, conflicts, or writes at rest. These stories
// control the operator process, so they need it on this machine.
func TestOperatorRestartsAndFailover(t *testing.T) {
	var ns string
	const caches = 12
	name := func(i int) string { return fmt.Sprintf("cache-%02d", i) }
	convergedAll := func(t *testing.T, c client.Client, size int32) {
		t.Helper()
		for i := range caches {
			converged(t, c, client.ObjectKey{Namespace: ns, Name: name(i)}, size)
		}
	}
	resize := func(ctx context.Context, t *testing.T, c client.Client, size int32) {
		t.Helper()
		for i := range caches {
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)}}
			NewWithT(t).Expect(c.Patch(ctx, m, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"size":%d}}`, size)))).To(Succeed())
		}
	}

	f := features.New("restarts and failover").WithLabel("story", "reliability").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if operator == nil {
				t.Skip("the operator runs in the cluster: these stories need it as a host process")
			}
			ns = namespace(t, cfg, "reliability")
			return ctx
		}).
		Assess("killed mid-rollout and restarted, it converges without duplicates, conflicts or writes at rest", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			for i := range caches {
				m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
				g.Expect(c.Create(ctx, m)).To(Succeed())
			}
			// Killed once some are applied: the first Deployment exists.
			g.Eventually(func() ([]appsv1.StatefulSet, error) {
				deps := &appsv1.StatefulSetList{}
				err := c.List(ctx, deps, client.InNamespace(ns))
				return deps.Items, err
			}).WithTimeout(timeout).WithPolling(50 * time.Millisecond).ShouldNot(BeEmpty())
			operator.Kill()
			resize(ctx, t, c, 2) // specs change while it is down

			op, err := runOperator(cfg)
			g.Expect(err).NotTo(HaveOccurred())
			operator = op
			convergedAll(t, c, 2)

			deps := &appsv1.StatefulSetList{}
			g.Expect(c.List(ctx, deps, client.InNamespace(ns))).To(Succeed())
			g.Expect(deps.Items).To(HaveLen(caches), "one StatefulSet per Memcached")
			counts, err := operator.clientRequests()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(counts[409]).To(BeZero())

			// The StatefulSet controller's last report on each: rolled out.
			g.Eventually(func(g Gomega) {
				deps := &appsv1.StatefulSetList{}
				g.Expect(c.List(ctx, deps, client.InNamespace(ns))).To(Succeed())
				for _, d := range deps.Items {
					g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation), d.Name)
					g.Expect(d.Status.Replicas).To(Equal(int32(2)), d.Name)
					g.Expect(d.Status.AvailableReplicas).To(Equal(int32(2)), d.Name)
					g.Expect(d.Status.UpdatedReplicas).To(Equal(int32(2)), d.Name)
					g.Expect(rolledOut(&d)).To(BeTrue(), d.Name)
				}
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			// No writes once converged, reconciles included. (The
			// operator's request counters cannot be used here: they also
			// count status writes for other tests' objects whose
			// namespaces are being deleted.)
			var names []string
			for i := range caches {
				names = append(names, name(i))
			}
			atRest(t, c, ns, names...)
			return ctx
		}).
		Assess("with two replicas only the leader writes, and the other takes over when it stops", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			g.Expect(operator.Stop()).To(Succeed())
			election := []string{"--leader-elect", "--leader-election-namespace", ns}
			first, err := runOperator(cfg, election...)
			g.Expect(err).NotTo(HaveOccurred())
			second, err := runOperator(cfg, election...)
			g.Expect(err).NotTo(HaveOccurred())
			t.Cleanup(func() { _ = first.Stop(); _ = second.Stop() })

			isLeader := func(o *hostOperator) bool {
				v, err := o.MetricSum("leader_election_master_status")
				return err == nil && v == 1
			}
			var leader, follower *hostOperator
			g.Eventually(func() bool {
				switch {
				case isLeader(first) && !isLeader(second):
					leader, follower = first, second
				case isLeader(second) && !isLeader(first):
					leader, follower = second, first
				}
				return leader != nil
			}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "exactly one leader")

			resize(ctx, t, c, 3)
			convergedAll(t, c, 3)
			// The follower writes nothing at all: no apply, update or
			// delete, and no create but, at most, one of the Lease that
			// lost the race to the leader's (409).
			for _, method := range []string{"PATCH", "POST", "PUT", "DELETE"} {
				n, err := follower.MetricSum("rest_client_requests_total", `method="`+method+`"`)
				g.Expect(err).NotTo(HaveOccurred())
				conflicts, err := follower.MetricSum("rest_client_requests_total", `method="`+method+`"`, `code="409"`)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(n-conflicts).To(BeZero(), "the follower sends no %s that lands", method)
			}
			leaderPatches, err := leader.MetricSum("rest_client_requests_total", `method="PATCH"`)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(leaderPatches).To(BeNumerically(">=", caches), "the leader applied the resize of every Memcached")

			lease := &coordinationv1.Lease{}
			leaseKey := client.ObjectKey{Namespace: ns, Name: operatorpkg.LeaderElectionID}
			g.Expect(c.Get(ctx, leaseKey, lease)).To(Succeed())
			holder := ptr.Deref(lease.Spec.HolderIdentity, "")
			g.Expect(holder).NotTo(BeEmpty(), "the leader holds the Lease")
			transitions := ptr.Deref(lease.Spec.LeaseTransitions, 0)

			// SIGTERM: the leader releases its Lease, so failover does not
			// wait for the lease to expire (15 s): the follower takes it on
			// its next retry (every 2 s), well within the lease duration.
			start := time.Now()
			g.Expect(leader.Stop()).To(Succeed())
			g.Eventually(func(g Gomega) {
				g.Expect(isLeader(follower)).To(BeTrue(), "the follower leads")
				g.Expect(c.Get(ctx, leaseKey, lease)).To(Succeed())
				g.Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).NotTo(BeElementOf("", holder), "the Lease names the new leader")
				g.Expect(ptr.Deref(lease.Spec.LeaseTransitions, 0)).To(BeNumerically(">", transitions))
			}).WithTimeout(8 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
			t.Logf("failover took %s; lease duration %ds", time.Since(start).Round(time.Millisecond), ptr.Deref(lease.Spec.LeaseDurationSeconds, 0))

			resize(ctx, t, c, 1)
			convergedAll(t, c, 1)

			// Later features expect the single operator back.
			g.Expect(follower.Stop()).To(Succeed())
			op, err := runOperator(cfg)
			g.Expect(err).NotTo(HaveOccurred())
			operator = op
			return ctx
		}).
		Assess("Memcacheds deleted mid-rollout leave nothing behind and no error loop", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			errorsSoFar := func() float64 {
				v, err := operator.MetricSum("controller_runtime_reconcile_errors_total", `controller="memcached"`)
				g.Expect(err).NotTo(HaveOccurred())
				return v
			}
			before := errorsSoFar()
			for i := range caches {
				m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("short-lived-%d", i)}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)}}
				g.Expect(c.Create(ctx, m)).To(Succeed())
			}
			// Deleted with their rollouts under way: each has its StatefulSet.
			g.Eventually(func() (int, error) {
				deps := &appsv1.StatefulSetList{}
				err := c.List(ctx, deps, client.InNamespace(ns))
				n := 0
				for _, d := range deps.Items {
					if strings.HasPrefix(d.Name, "short-lived-") {
						n++
					}
				}
				return n, err
			}).WithTimeout(timeout).WithPolling(50 * time.Millisecond).Should(Equal(caches))
			for i := range caches {
				m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("short-lived-%d", i)}}
				g.Expect(c.Delete(ctx, m)).To(Succeed())
			}
			g.Eventually(func(g Gomega) {
				deps := &appsv1.StatefulSetList{}
				g.Expect(c.List(ctx, deps, client.InNamespace(ns))).To(Succeed())
				for _, d := range deps.Items {
					g.Expect(d.Name).NotTo(HavePrefix("short-lived-"))
				}
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			time.Sleep(5 * time.Second)
			g.Expect(errorsSoFar()).To(Equal(before), "reconcile errors after the deletions")
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
