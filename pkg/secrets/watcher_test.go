package secrets

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestAWatchStopsWhenNoMemcachedNamesItsSecret: each Secret is watched by
// name while a Memcached names it, and no longer once none does, so that
// the operator reads no Secret it does not mount.
func TestAWatchStopsWhenNoMemcachedNamesItsSecret(t *testing.T) {
	g := NewWithT(t)
	client := fake.NewClientset()
	var mu sync.Mutex
	watches := map[string][]*watch.FakeWatcher{} // by field selector
	client.PrependWatchReactor("secrets", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		mu.Lock()
		defer mu.Unlock()
		sel := a.(k8stesting.WatchAction).GetWatchRestrictions().Fields.String()
		watches[sel] = append(watches[sel], w)
		return true, w, nil
	})
	// open tells, for each Secret by name, whether a watch of it is open.
	open := func() map[string]bool {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]bool{}
		for sel, ws := range watches {
			for _, w := range ws {
				out[sel] = out[sel] || !w.IsStopped()
			}
		}
		return out
	}
	w := NewWatcher(client, func(types.NamespacedName) {})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Start(ctx) }()

	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	w.Follow(a, "tls", "users")
	w.Follow(b, "tls")
	g.Eventually(open).WithTimeout(10 * time.Second).Should(Equal(map[string]bool{"metadata.name=tls": true, "metadata.name=users": true}))

	w.Follow(a, "tls")
	g.Eventually(open).WithTimeout(10*time.Second).Should(Equal(map[string]bool{"metadata.name=tls": true, "metadata.name=users": false}),
		"no Memcached names users any more: its watch stops; b still names tls")

	w.Forget(a)
	w.Forget(b)
	g.Eventually(open).WithTimeout(10 * time.Second).Should(Equal(map[string]bool{"metadata.name=tls": false, "metadata.name=users": false}))
}
