package main

import (
	"context"
	"fmt"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/told"
)

// watchedGet reads an object from the watch, and from the apiserver only
// when the watch has not shown it yet.
func watchedGet(ctx context.Context, watch, c client.Reader, key client.ObjectKey, obj client.Object) error {
	if err := watch.Get(ctx, key, obj); !apierrors.IsNotFound(err) {
		return err
	}
	return c.Get(ctx, key, obj)
}

// waitRolledOut waits until n StatefulSets of ns have rolled out size
// available replicas of their current generation.
func waitRolledOut(ctx context.Context, watch client.Reader, ns string, n int, size int32) error {
	for {
		list := &appsv1.StatefulSetList{}
		if err := watch.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		ready := 0
		for _, d := range list.Items {
			if d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == size && d.Status.UpdatedReplicas == size {
				ready++
			}
		}
		if ready == n {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%d of %d StatefulSets rolled out", ready, n)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// deleteNamespace deletes ns and waits until it is gone: before the
// operator's phases start, deleting a thousand Deployments, their pods and
// Services is work for the same two cores.
func deleteNamespace(ctx context.Context, c client.Client, ns string) error {
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	for {
		err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		time.Sleep(time.Second)
	}
}

// readYAML decodes the first object of a YAML file.
func readYAML(path string, into any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := k8syaml.NewYAMLOrJSONDecoder(f, 4096).Decode(into); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}

// waitConverged waits at most limit until every Memcached of the bench
// namespace reports size ready replicas for its current generation,
// reading them from r.
func waitConverged(ctx context.Context, r client.Reader, n int, size int32, limit time.Duration, progress func(done int)) error {
	ns := benchNamespace
	deadline := time.Now().Add(limit)
	lastReport := time.Now()
	done := 0
	for time.Now().Before(deadline) {
		list := &cachev1alpha1.MemcachedList{}
		if err := r.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		done = 0
		for _, m := range list.Items {
			if m.Status.ObservedGeneration == m.Generation && m.Status.ReadyReplicas == size &&
				meta.IsStatusConditionTrue(m.Status.Conditions, cachev1alpha1.ConditionAvailable) &&
				meta.IsStatusConditionFalse(m.Status.Conditions, cachev1alpha1.ConditionReconciling) {
				done++
			}
		}
		if done == n {
			if podsTold(ctx, r, list.Items) {
				return nil
			}
		}
		if time.Since(lastReport) >= time.Minute {
			progress(done)
			lastReport = time.Now()
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("%d of %d Memcacheds converged after %s", done, n, limit)
}

// podsTold tells whether every running pod of ms was told of its
// membership (told.Membership): the operator is done only then.
func podsTold(ctx context.Context, r client.Reader, ms []cachev1alpha1.Memcached) bool {
	for i := range ms {
		if told.Membership(ctx, r, &ms[i]) != nil {
			return false
		}
	}
	return true
}

// waitGone waits until the Memcacheds of the bench namespace and everything
// they owned are gone, reading them from r.
func waitGone(ctx context.Context, r client.Reader) error {
	ns := benchNamespace
	for {
		left := 0
		for _, l := range []client.ObjectList{&cachev1alpha1.MemcachedList{}, &appsv1.StatefulSetList{}, &corev1.ServiceList{}, &policyv1.PodDisruptionBudgetList{}} {
			if err := r.List(ctx, l, client.InNamespace(ns)); err != nil {
				return err
			}
			left += meta.LenList(l)
		}
		if left == 0 {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// watchNamespace returns a reader of the objects of ns served from watches.
// The bench waits on what it sees there: that costs the apiserver one list
// and one watch per kind, where polling would list every object four times
// a second, load on the same two cores as what is measured. The watches end
// with ctx.
func watchNamespace(ctx context.Context, cfg *rest.Config, ns string) (cache.Cache, error) {
	ca, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, err
	}
	go func() {
		if err := ca.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "bench: watching", ns+":", err)
		}
	}()
	if !ca.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("watching %s: the cache did not start", ns)
	}
	return ca, nil
}
