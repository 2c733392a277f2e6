package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/repo"
	"github.com/example/memcached-operator/pkg/desired"
)

// workers is how many requests the bench sends at once.
const workers = 32

func parallel(names []string, f func(string) error) error {
	ch := make(chan string)
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for name := range ch {
				if err := f(name); err != nil {
					errs <- err
				}
			}
		})
	}
	for _, n := range names {
		ch <- n
	}
	close(ch)
	wg.Wait()
	close(errs)
	return <-errs
}

// runBaseline creates n Deployments and Services directly and waits until
// they are Available; it returns how long that took and what CPU each of
// the cluster's processes spent meanwhile.
func runBaseline(ctx context.Context, cfg *rest.Config, c client.Client, n int, procs processes) (time.Duration, map[string]float64, error) {
	ns := "baseline"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return 0, nil, err
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	watch, err := watchNamespace(watchCtx, cfg, ns)
	if err != nil {
		return 0, nil, err
	}
	// The Deployment informer starts on the first list: before the clock does.
	if err := watch.List(ctx, &appsv1.DeploymentList{}, client.InNamespace(ns)); err != nil {
		return 0, nil, err
	}
	start, cpu0 := time.Now(), procs.cpu()
	err = parallel(names("cache", n), func(name string) error {
		// The Deployment and Service the operator would build, created
		// directly (a Memcached of size 1 has no PodDisruptionBudget).
		m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
		dep := desired.Deployment(m, desired.Images{Memcached: desired.DefaultImage}, desired.SecretDigests{})
		dep.OwnerReferences = nil // there is no Memcached to own it
		if err := c.Apply(ctx, dep, client.FieldOwner("bench-baseline")); err != nil {
			return err
		}
		svc := desired.Service(m)
		svc.OwnerReferences = nil
		return c.Apply(ctx, svc, client.FieldOwner("bench-baseline"))
	})
	if err != nil {
		return 0, nil, err
	}
	for {
		list := &appsv1.DeploymentList{}
		if err := watch.List(ctx, list, client.InNamespace(ns)); err != nil {
			return 0, nil, err
		}
		ready := 0
		for _, d := range list.Items {
			if d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == 1 && d.Status.UpdatedReplicas == 1 {
				ready++
			}
		}
		if ready == n {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	took, cpu := time.Since(start), since(procs.cpu(), cpu0)
	// Gone before the operator's phases start: deleting a thousand
	// Deployments, their pods and Services is work for the same two cores.
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return 0, nil, err
	}
	for {
		err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return took, cpu, nil
		}
		if err != nil {
			return 0, nil, err
		}
		time.Sleep(time.Second)
	}
}

func createUnrelated(ctx context.Context, c client.Client, n int) error {
	ns := "unrelated"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	return parallel(names("app", n), func(name string) error {
		labels := map[string]string{"app": name}
		return c.Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](0),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}},
				},
			},
		})
	})
}

func setUpOperatorUser(ctx context.Context, c client.Client) error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: operatorSA}},
	}
	// The operator's generated ClusterRole, bound to its ServiceAccount.
	role := &rbacv1.ClusterRole{}
	if err := readYAML(repo.Path("manifests", "rbac", "role.yaml"), role); err != nil {
		return err
	}
	role.Name = "memcached-bench-operator"
	objs = append(objs, role, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "memcached-bench-operator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: operatorNamespace, Name: operatorSA}},
	})
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
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
			return nil
		}
		if time.Since(lastReport) >= time.Minute {
			progress(done)
			lastReport = time.Now()
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("%d of %d Memcacheds converged after %s", done, n, limit)
}

// waitGone waits until the Memcacheds of the bench namespace and everything
// they owned are gone, reading them from r.
func waitGone(ctx context.Context, r client.Reader) error {
	ns := benchNamespace
	for {
		left := 0
		for _, l := range []client.ObjectList{&cachev1alpha1.MemcachedList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{}, &policyv1.PodDisruptionBudgetList{}} {
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
func watchNamespace(ctx context.Context, cfg *rest.Config, ns string) (client.Reader, error) {
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
