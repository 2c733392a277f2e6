//go:build integration

package reconnect_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/example/memcached-operator/internal/testsupport/localcluster"
	"github.com/example/memcached-operator/pkg/reconnect"
)

// Informers that list and watch through reconnect.ListWatch have the
// news of an apiserver killed for 30 s within seconds of its return, every
// one of them: as many as the operator runs in a namespace. (With
// client-go's own backoff, the last of 14 informers had it 61 s and 79 s
// after, in two runs.)
func TestInformersResumeWithinSecondsOfAnOutage(t *testing.T) {
	const informers, outage = 14, 30 * time.Second
	// The most an informer's news may lag the apiserver's return: one
	// delay between tries, and slack for a busy machine.
	const bound = reconnect.MaxDelay + 8*time.Second
	g := NewWithT(t)
	ctx := context.Background()
	c, err := localcluster.Create(ctx, "reconnect", localcluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Delete(context.Background()) })
	cfg, err := c.Config()
	g.Expect(err).NotTo(HaveOccurred())
	cs := kubernetes.NewForConfigOrDie(cfg)
	const ns = "default"

	seen := startInformersOf(t, cs, ns, informers, "after")

	pids, err := c.PIDs()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pids).To(HaveKey("kube-apiserver"))
	g.Expect(syscall.Kill(pids["kube-apiserver"], syscall.SIGKILL)).To(Succeed())
	release, err := c.HoldAPIServerPort()
	g.Expect(err).NotTo(HaveOccurred())
	time.Sleep(outage)
	release()
	g.Expect(c.StartStopped(ctx)).To(Succeed())

	waitReady(t, cfg)
	g.Eventually(func() error {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{})
		return err
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	created := time.Now()

	// Past the bound, to report how late the others were.
	deadline := time.Now().Add(2 * time.Minute)
	for len(seen.lags(created)) < informers && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	got := seen.lags(created)
	t.Logf("the informers had the news after %v", got)
	g.Expect(got).To(HaveLen(informers), "every informer has the news")
	g.Expect(got[len(got)-1]).To(BeNumerically("<=", bound), fmt.Sprintf("every informer within %v of the apiserver's return", bound))
}

// seenAt is when each informer had the news of an object.
type seenAt struct {
	mu sync.Mutex
	at map[int]time.Time
}

// lags are how long after created each informer had the news, shortest
// first.
func (s *seenAt) lags(created time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var l []time.Duration
	for _, at := range s.at {
		l = append(l, at.Sub(created).Round(time.Millisecond))
	}
	slices.Sort(l)
	return l
}

// startInformersOf runs n informers of the ConfigMaps of ns, each noting
// when it has the news of the ConfigMap name, until the test ends.
func startInformersOf(t *testing.T, cs kubernetes.Interface, ns string, n int, name string) *seenAt {
	g := NewWithT(t)
	seen := &seenAt{at: map[int]time.Time{}}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	for i := range n {
		lw := toolscache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", ns, fields.Everything())
		inf := reconnect.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
		_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			if obj.(*corev1.ConfigMap).Name == name {
				seen.mu.Lock()
				seen.at[i] = time.Now()
				seen.mu.Unlock()
			}
		}})
		g.Expect(err).NotTo(HaveOccurred())
		go inf.Run(stop)
		g.Expect(toolscache.WaitForCacheSync(stop, inf.HasSynced)).To(BeTrue())
	}
	return seen
}

// waitReady waits until the apiserver of cfg says it is ready.
func waitReady(t *testing.T, cfg *rest.Config) {
	hc, err := rest.HTTPClientFor(cfg)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Eventually(func() (int, error) {
		r, err := hc.Get(cfg.Host + "/readyz")
		if err != nil {
			return 0, err
		}
		_ = r.Body.Close()
		return r.StatusCode, nil
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Equal(http.StatusOK))
}
