//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/ring"
)

const (
	// keptKeys are written once the load stops, and read through the
	// step down.
	keptKeys = 2000
	// loadKeys of 1 KiB are three times what a slot of 16 MiB holds.
	loadKeys = 40000
)

// A Memcached at minSize 1 (spec.autoscaling) under a load that evicts
// items still being read grows a slot on its own, read from the pods'
// signals, and shrinks back once the load has stopped and what is read
// fits one slot again (its down window, and the working set's): each step
// a Scaled event and a move of keys, and the keys written after the load
// all kept through the step down, none stale.
func TestACacheSizesItselfOnItsOwnSignals(t *testing.T) {
	t.Parallel()
	var ns string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "sizing"} }
	rc := &ringClient{}
	endpoints := func(t *testing.T, cfg *envconf.Config) func() []string {
		return func() []string { return discoveryEndpoints(t, cfg, key()) }
	}
	f := features.New("a cache sizes itself").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("reaches the pods' addresses from this machine: local cluster only")
			}
			ns = namespace(t, cfg, "sizing")
			spec := onRealNode(1)
			spec.MemoryLimitMiB = ptr.To[int32](16)
			spec.KeyMoves = &cachev1alpha1.KeyMovesSpec{Ring: string(ring.Libmemcached), ClientPollSeconds: ptr.To[int32](3)}
			spec.Autoscaling = &cachev1alpha1.AutoscalingSpec{MinSize: 1, MaxSize: 2, ScaleUpSeconds: ptr.To[int32](10), ScaleDownSeconds: ptr.To[int32](60)}
			runningMemcached(t, cfg, key(), spec)
			NewWithT(t).Eventually(func() error { return rc.follow(endpoints(t, cfg)()) }).WithTimeout(timeout).Should(Succeed())
			return ctx
		}).
		Assess("a load that evicts read items adds a slot", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			halt := startEvictingLoad(t, rc, endpoints(t, cfg))
			defer halt() // also when the wait below fails: what the load met is logged
			start := time.Now()
			m := sizedTo(t, cfg, key(), 2, 3*time.Minute)
			t.Logf("grown to 2 slots %s after the load began: %s", time.Since(start).Round(time.Second), m.Status.Autoscaling.LastScale)
			g := NewWithT(t)
			g.Expect(m.Status.Autoscaling.LastScale).To(ContainSubstring("scaled from 1 to 2 slots: "))
			g.Expect(m.Status.Autoscaling.LastScale).To(ContainSubstring("evictions of read items a minute per slot, over the target of 60"))
			g.Expect(eventsOf(g, t, cfg, key(), "Scaled")).To(ContainElement(HaveField("Note", ContainSubstring("Autoscaling scaled from 1 to 2 slots"))))
			return ctx
		}).
		Assess("once the load stops, a slot is removed and the keys stay", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g := NewWithT(t)
			g.Eventually(func() error { return rc.follow(endpoints(t, cfg)()) }).WithTimeout(timeout).Should(Succeed())
			latest := map[string]string{}
			for i := range keptKeys {
				k := fmt.Sprintf("kept-%d", i)
				latest[k] = "v-" + k
				g.Expect(rc.set(k, latest[k])).To(Succeed())
			}
			start := time.Now()
			m := sizedTo(t, cfg, key(), 1, 6*time.Minute)
			t.Logf("back to 1 slot %s after the load stopped: %s", time.Since(start).Round(time.Second), m.Status.Autoscaling.LastScale)
			g.Expect(m.Status.Autoscaling.LastScale).To(ContainSubstring("scaled from 2 to 1 slots: "))
			g.Expect(m.Status.Autoscaling.LastScale).To(ContainSubstring("fit 1 slot ("))
			g.Expect(m.Status.Autoscaling.LastScale).To(ContainSubstring("1 slot would lose an estimated"))
			g.Eventually(func(g Gomega) {
				g.Expect(rc.follow(endpoints(t, cfg)())).To(Succeed())
				g.Expect(rc.addr).To(HaveLen(1))
			}).WithTimeout(timeout).Should(Succeed())
			kept, stale := 0, 0
			for k, v := range latest {
				got, err := rc.get(k)
				g.Expect(err).NotTo(HaveOccurred())
				switch {
				case got == v:
					kept++
				case got != "":
					stale++
				}
			}
			t.Logf("through the step down: %d of %d keys kept, %d stale", kept, keptKeys, stale)
			g.Expect(stale).To(BeZero())
			g.Expect(kept).To(Equal(keptKeys))
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// startEvictingLoad sets keys of 1 KiB in turn through rc, following the
// membership every second, and reads each a moment after, so that the
// items memcached evicts have been read, until the function it returns is
// called; that logs how many sets succeeded, how many failed, and the
// first failure.
func startEvictingLoad(t *testing.T, rc *ringClient, endpoints func() []string) (halt func()) {
	stop, done := make(chan struct{}), make(chan struct{})
	var sets, failed int
	var first error
	go func() {
		defer close(done)
		value := strings.Repeat("x", 1024)
		polled := time.Now()
		for i := 0; ; i = (i + 1) % loadKeys {
			select {
			case <-stop:
				return
			default:
			}
			if time.Since(polled) > time.Second {
				if err := rc.follow(endpoints()); err != nil {
					t.Logf("the load keeps its membership: %v", err)
				}
				polled = time.Now()
			}
			if err := rc.set(fmt.Sprintf("load-%d", i), value); err != nil {
				failed++
				if first == nil {
					first = err
				}
			} else {
				sets++
			}
			if i >= 10 {
				_, _ = rc.get(fmt.Sprintf("load-%d", i-10))
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-done
			t.Logf("the load set %d keys, %d sets failed (the first: %v)", sets, failed, first)
		})
	}
}

// sizedTo waits until the Memcached key's spec.size is size, the
// autoscaler's last step said in its status, and the size reached.
func sizedTo(t *testing.T, cfg *envconf.Config, key client.ObjectKey, size int32, within time.Duration) *cachev1alpha1.Memcached {
	t.Helper()
	c := kube(t, cfg)
	NewWithT(t).Eventually(func(g Gomega) {
		m := &cachev1alpha1.Memcached{}
		g.Expect(c.Get(context.Background(), key, m)).To(Succeed())
		g.Expect(m.Spec.Size).To(HaveValue(Equal(size)), "status.autoscaling: %+v", m.Status.Autoscaling)
	}).WithTimeout(within).WithPolling(time.Second).Should(Succeed())
	m, _ := converged(t, c, key, size)
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(c.Get(context.Background(), key, m)).To(Succeed())
		g.Expect(m.Status.Autoscaling).NotTo(BeNil())
		g.Expect(m.Status.Autoscaling.LastScale).To(ContainSubstring(fmt.Sprintf("to %d slots", size)))
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
	return m
}
