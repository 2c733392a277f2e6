//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/podtemplate"
)

// The apiserver dies and stays away for 30 s (etcd keeps the data) right after specs
// change, before the operator applied them: the operator neither exits nor
// crash-loops, and converges to the latest specs once it is back. This stops a component of the cluster, so it
// runs on the local cluster only.
func TestAPIServerOutage(t *testing.T) {
	var ns string
	const caches, outage = 3, 30 * time.Second
	// What converging takes once the apiserver serves again: a new
	// controller manager's lease (up to 15 s), the StatefulSets' new pods
	// and the rollout's steps, and slack for a busy machine.
	const afterReturn = 40 * time.Second
	key := func(i int) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("cache-%d", i)} }

	f := features.New("apiserver outage").WithLabel("story", "reliability").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" || operator == nil {
				t.Skip("stopping the apiserver needs the local cluster and the operator as a host process")
			}
			ns = namespace(t, cfg, "outage")
			c := kube(t, cfg)
			for i := range caches {
				m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key(i).Name}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
				NewWithT(t).Expect(c.Create(ctx, m)).To(Succeed())
			}
			for i := range caches {
				converged(t, c, key(i), 1)
			}
			return ctx
		}).
		Assess("the operator survives 30 s without an apiserver and converges after", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			// The operator frozen while the specs change and the apiserver
			// dies: the changes are still to apply when it goes.
			g.Expect(syscall.Kill(operator.Pid(), syscall.SIGSTOP)).To(Succeed())
			resumed := false
			resume := func() {
				if !resumed {
					g.Expect(syscall.Kill(operator.Pid(), syscall.SIGCONT)).To(Succeed())
					resumed = true
				}
			}
			t.Cleanup(resume)
			for i := range caches {
				m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key(i).Name}}
				g.Expect(c.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":2,"threads":3}}`)))).To(Succeed())
			}
			time.Sleep(time.Second)
			for i := range caches {
				d := &appsv1.StatefulSet{}
				g.Expect(c.Get(ctx, key(i), d)).To(Succeed())
				g.Expect(*d.Spec.Replicas).To(Equal(int32(1)), "unapplied when the apiserver dies")
				g.Expect(podtemplate.MemcachedFlags(d.Spec.Template)).NotTo(ContainElement("--threads=3"), "unapplied when the apiserver dies")
			}

			pids, err := localCluster.PIDs()
			g.Expect(err).NotTo(HaveOccurred())
			pid := pids["kube-apiserver"]
			g.Expect(pid).NotTo(BeZero())
			// SIGKILL: a graceful stop drains for a minute or more, and a crash
			// is an outage too; etcd keeps the data.
			g.Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
			stopped := time.Now()
			g.Eventually(func() error { return syscall.Kill(pid, 0) }).WithTimeout(time.Minute).WithPolling(100*time.Millisecond).
				Should(MatchError(syscall.ESRCH), "kube-apiserver exits")
			t.Logf("kube-apiserver (pid %d) stopped", pid)
			// No cluster the other tests make meanwhile takes its port.
			release, err := localCluster.HoldAPIServerPort()
			g.Expect(err).NotTo(HaveOccurred())
			// Woken, the operator has the specs' events and no apiserver to
			// apply them to.
			resume()
			time.Sleep(outage - time.Since(stopped))
			g.Expect(operator.Exited()).To(BeFalse(), "the operator exited while the apiserver was away")
			release()

			// kwokctl starts the components that are not running. The
			// controller manager and the scheduler exit once they cannot
			// renew their lease, which can be after that start on a busy
			// machine: they are started again then, as the kubelet restarts
			// a control plane's static pods.
			restarted := keepClusterUp(ctx, t, time.Minute)
			t.Cleanup(func() {
				if t.Failed() {
					describeOutage(t, cfg, ns, restarted())
				}
			})

			back := servingAgain(ctx, t, cfg)
			t.Logf("kube-apiserver serves again %v after it stopped", back.Sub(stopped).Round(time.Millisecond))
			for i := range caches {
				_, d := converged(t, c, key(i), 2)
				g.Expect(podtemplate.MemcachedFlags(d.Spec.Template)).To(ContainElement("--threads=3"))
			}
			// The operator's informers and its failed reconciles try the
			// apiserver again within seconds (package reconnect), not after
			// client-go's and controller-runtime's backoffs, which grow to
			// a minute and more through an outage this long.
			took := time.Since(back)
			t.Logf("converged %v after the apiserver's return", took.Round(time.Millisecond))
			g.Expect(took).To(BeNumerically("<", afterReturn), "converged within %v of the apiserver's return", afterReturn)
			g.Expect(operator.WaitReady(10 * time.Second)).To(BeTrue())
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// servingAgain waits until the apiserver answers its readiness check, and
// returns when it did.
func servingAgain(ctx context.Context, t *testing.T, cfg *envconf.Config) time.Time {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg.Client().RESTConfig())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Eventually(func() error {
		return dc.RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	}).WithTimeout(2*time.Minute).WithPolling(100*time.Millisecond).Should(Succeed(), "kube-apiserver serves again")
	return time.Now()
}

// keepClusterUp starts the local cluster's components that are not
// running, and for watch after that, in the background, starts again any
// that exits. What it started again, one entry per time, is what the
// function it returns says (it stops the watch).
func keepClusterUp(ctx context.Context, t *testing.T, watch time.Duration) func() []string {
	t.Helper()
	start := func() error { return localCluster.StartStopped(context.WithoutCancel(ctx)) }
	NewWithT(t).Expect(start()).To(Succeed())
	watching, stop := context.WithTimeout(ctx, watch)
	var again []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for watching.Err() == nil {
			time.Sleep(time.Second)
			gone, err := localCluster.Stopped()
			if err != nil {
				t.Errorf("reading the cluster's components: %v", err)
				return
			}
			if len(gone) == 0 {
				continue
			}
			t.Logf("%s exited after the cluster's start; starting it again", strings.Join(gone, ", "))
			again = append(again, strings.Join(gone, ", ")+" at "+time.Now().Format(time.TimeOnly))
			if err := start(); err != nil && watching.Err() == nil {
				t.Errorf("starting the cluster's components again: %v", err)
				return
			}
		}
	}()
	t.Cleanup(func() {
		stop()
		<-done
		// The stories after this one run on the same cluster: whatever
		// this one ends with, it leaves every component running.
		if gone, err := localCluster.Stopped(); err != nil || len(gone) > 0 {
			t.Logf("stopped at the end: %v (%v); starting them again", gone, err)
			if err := start(); err != nil {
				t.Errorf("starting the cluster's components again: %v", err)
			}
		}
	})
	return func() []string {
		stop()
		<-done
		return again
	}
}

// describeOutage logs what a failed outage test leaves to read: the
// Memcacheds of ns and their conditions, their pods and phases, which
// components of the cluster run, the operator's work queue (a reconcile
// that never returns, an item waiting) and where its goroutines are.
func describeOutage(t *testing.T, cfg *envconf.Config, ns string, restarted []string) {
	memcacheds := &cachev1alpha1.MemcachedList{}
	if err := kube(t, cfg).List(context.Background(), memcacheds, client.InNamespace(ns)); err != nil {
		t.Logf("listing the Memcacheds of %s: %v", ns, err)
	}
	for _, m := range memcacheds.Items {
		t.Logf("memcached %s: generation %d, observed %d, %d ready", m.Name, m.Generation, m.Status.ObservedGeneration, m.Status.ReadyReplicas)
		for _, c := range m.Status.Conditions {
			t.Logf("  %s=%s %s (generation %d, %s): %s", c.Type, c.Status, c.Reason, c.ObservedGeneration, c.LastTransitionTime.Format(time.TimeOnly), c.Message)
		}
	}
	sets := &appsv1.StatefulSetList{}
	if err := kube(t, cfg).List(context.Background(), sets, client.InNamespace(ns)); err != nil {
		t.Logf("listing the StatefulSets of %s: %v", ns, err)
	}
	for _, d := range sets.Items {
		t.Logf("statefulset %s: generation %d, observed %d, replicas %d/%d/%d/%d (spec/updated/ready/available)", d.Name, d.Generation,
			d.Status.ObservedGeneration, ptr.Deref(d.Spec.Replicas, 1), d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas)
	}
	err := operator.Scrape(func(name, labels string, v float64) {
		switch name {
		case "workqueue_depth", "workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds",
			"controller_runtime_active_workers", "controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total":
			t.Logf("operator metric %s%s %v", name, labels, v)
		}
	})
	if err != nil {
		t.Logf("reading the operator's metrics: %v", err)
	}
	if dump, err := goroutines(operator.PprofAddr); err != nil {
		t.Logf("reading the operator's goroutines: %v", err)
	} else {
		t.Logf("the operator's goroutines: %s", dump)
	}
	pods := &corev1.PodList{}
	if err := kube(t, cfg).List(context.Background(), pods, client.InNamespace(ns)); err != nil {
		t.Logf("listing the pods of %s: %v", ns, err)
	}
	for _, p := range pods.Items {
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		t.Logf("pod %s: %s on %q, ready %v", p.Name, p.Status.Phase, p.Spec.NodeName, ready)
	}
	pids, err := localCluster.PIDs()
	t.Logf("the cluster's running components: %v (%v)", pids, err)
	stopped, err := localCluster.Stopped()
	t.Logf("its stopped components: %v (%v)", stopped, err)
	t.Logf("components started again after the first start: %v", restarted)
}

// goroutines writes the goroutines of the operator serving pprof at addr
// to a file, and says which.
func goroutines(addr string) (string, error) {
	if addr == "" {
		return "", errors.New("the operator serves no pprof")
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=2")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	f, err := os.CreateTemp("", "memcached-operator-goroutines-*.txt")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		return "", err
	}
	return f.Name(), nil
}
