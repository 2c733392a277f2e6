//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/tutorial"
	"github.com/example/memcached-operator/pkg/desired"
)

// A Memcached served by the tutorial's operator on the real node (its
// finalizer, its Deployment, its status by Update) is taken over by this
// operator while a client stores and reads a value on every ready pod of
// the Memcached, old and new, every 100 ms: never fewer than size pods
// answer, and none refuses.
func TestTakeOverKeepsServing(t *testing.T) {
	var ns string
	const size = 2
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "tutorial"} }
	f := features.New("taking over from the tutorial's operator keeps the cache serving").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if operator == nil {
				t.Skip("stops and starts the operator: it must run as a host process")
			}
			g, c := NewWithT(t), kube(t, cfg)
			ns = namespace(t, cfg, "takeover")
			// The tutorial's era: this operator is not running.
			g.Expect(operator.Stop()).To(Succeed())
			t.Cleanup(func() {
				if operator.Exited() { // the story failed before restarting it
					if op, err := runOperator(cfg); err == nil {
						operator = op
					}
				}
			})
			spec := onRealNode(size)
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key().Name}, Spec: spec}
			g.Expect(c.Create(ctx, m)).To(Succeed())
			g.Expect(c.Get(ctx, key(), m)).To(Succeed())
			image, _ := memcachedImages()
			d := tutorial.Deployment(m, image)
			// Placed on the real node like every pod of these stories, and
			// with "-m 64": memcached 1.6 reads the tutorial's "-m=64" as
			// 0 MiB and exits.
			podOnRealNode(&d.Spec.Template.Spec)
			d.Spec.Template.Spec.Containers[0].Command = []string{"memcached", "-m", "64", "-o", "modern", "-v"}
			g.Expect(tutorial.ReconcileWith(ctx, c, m, d)).To(Succeed())
			g.Eventually(func(g Gomega) {
				pods := &corev1.PodList{}
				g.Expect(c.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
				g.Expect(tutorial.ReadyPods(pods.Items, key().Name)).To(HaveLen(size))
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			return ctx
		}).
		Assess("size pods answer throughout, none refuses", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			var mu sync.Mutex
			var samples []int
			var refusals, leftMidRequest []string
			// sampled waits until the probe below has taken n samples more
			// than it had when called.
			sampled := func(t *testing.T, n int) {
				t.Helper()
				mu.Lock()
				from := len(samples)
				mu.Unlock()
				g.Eventually(func() int {
					mu.Lock()
					defer mu.Unlock()
					return len(samples) - from
				}).WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(BeNumerically(">=", n), "the probe samples")
			}
			probeCtx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; probeCtx.Err() == nil; i++ {
					addrs, err := readyPodAddresses(probeCtx, c, key())
					if err != nil {
						time.Sleep(100 * time.Millisecond)
						continue
					}
					n := 0
					for _, addr := range addrs {
						value := strconv.Itoa(i)
						out, err := session{}.run(addr,
							fmt.Sprintf("set k 0 0 %d", len(value)), value, "get k")
						if err == nil && strings.HasPrefix(out, "STORED\r\nVALUE k 0 "+strconv.Itoa(len(value))+"\r\n"+value+"\r\n") {
							n++
							continue
						}
						// The tutorial's pods stop at once when deleted (no
						// preStop): a request in flight as the Deployment goes
						// fails, which no client can avoid. Counted apart,
						// only where the pod is deleting or gone just after.
						failure := fmt.Sprintf("%s: %q %v", addr, out, err)
						deleting, lookErr := podDeletingOrGone(probeCtx, c, key().Namespace, addr)
						mu.Lock()
						if lookErr == nil && deleting {
							leftMidRequest = append(leftMidRequest, failure)
						} else {
							refusals = append(refusals, failure)
						}
						mu.Unlock()
					}
					mu.Lock()
					samples = append(samples, n)
					mu.Unlock()
					time.Sleep(100 * time.Millisecond)
				}
			}()
			sampled(t, 20) // before the operator starts

			// Taking over is opt-in (manifests/takeover); the suite's
			// operator runs as an administrator, so the flag is enough.
			op, err := runOperator(cfg, "--take-over")
			g.Expect(err).NotTo(HaveOccurred())
			operator = op
			start := time.Now()
			g.Eventually(func(g Gomega) {
				m := &cachev1alpha1.Memcached{}
				g.Expect(c.Get(ctx, key(), m)).To(Succeed())
				g.Expect(m.Status.ObservedGeneration).To(Equal(m.Generation))
				g.Expect(meta.IsStatusConditionTrue(m.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue())
				g.Expect(meta.IsStatusConditionFalse(m.Status.Conditions, cachev1alpha1.ConditionProgressing)).To(BeTrue())
				d := &appsv1.StatefulSet{}
				g.Expect(c.Get(ctx, key(), d)).To(Succeed())
				g.Expect(d.Spec.Selector.MatchLabels).To(Equal(desired.SelectorLabels(m)))
				g.Expect(d.Status.Replicas).To(Equal(int32(size)))
				g.Expect(d.Status.UpdatedReplicas).To(Equal(int32(size)))
				g.Expect(d.Status.ReadyReplicas).To(Equal(int32(size)))
				g.Expect(apierrors.IsNotFound(c.Get(ctx, key(), &appsv1.Deployment{}))).To(BeTrue(), "the tutorial's Deployment is deleted")
				pods := &corev1.PodList{}
				g.Expect(c.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
				for _, p := range pods.Items {
					g.Expect(metav1.GetControllerOf(&p).Kind).To(Equal("StatefulSet"), "no pod of the replaced Deployment left: %s", p.Name)
				}
			}).WithTimeout(2 * timeout).WithPolling(time.Second).Should(Succeed())
			t.Logf("takeover of %d pods took %s", size, time.Since(start).Round(time.Second))
			sampled(t, 20) // after the takeover
			stop()
			<-done

			mu.Lock()
			defer mu.Unlock()
			lowest, highest := size, 0
			for _, n := range samples {
				lowest, highest = min(lowest, n), max(highest, n)
			}
			t.Logf("%d samples, %d to %d pods answering, %d refusals, %d requests to a pod deleted meanwhile %v", len(samples), lowest, highest, len(refusals), len(leftMidRequest), leftMidRequest)
			g.Expect(len(samples)).To(BeNumerically(">", 30), "sampled throughout")
			g.Expect(refusals).To(BeEmpty(), "no ready pod refused a client")
			g.Expect(lowest).To(BeNumerically(">=", size), "never fewer than size pods serving")

			m := mustGet(t, c, key())
			g.Expect(m.Finalizers).NotTo(ContainElement(tutorial.Finalizer))
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// podDeletingOrGone tells whether the pod of address addr (ip:port) in
// namespace ns is being deleted or no longer exists.
func podDeletingOrGone(ctx context.Context, c client.Client, ns, addr string) (bool, error) {
	ip, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return false, err
	}
	for _, p := range pods.Items {
		if p.Status.PodIP == ip {
			return p.DeletionTimestamp != nil, nil
		}
	}
	return true, nil
}
