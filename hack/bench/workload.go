package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/repo"
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

// runBaseline creates n StatefulSets and Services directly and waits until
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
	// The StatefulSet informer starts on the first list: before the clock does.
	if err := watch.List(ctx, &appsv1.StatefulSetList{}, client.InNamespace(ns)); err != nil {
		return 0, nil, err
	}
	start, cpu0 := time.Now(), procs.cpu()
	err = parallel(names("cache", n), func(name string) error {
		// The StatefulSet and Service the operator would build, created
		// directly (a Memcached of size 1 has no PodDisruptionBudget).
		m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
		dep := desired.StatefulSet(m, desired.Images{Memcached: desired.DefaultImage}, desired.SecretDigests{})
		dep.OwnerReferences = nil // there is no Memcached to own it
		if err := c.Apply(ctx, dep, client.FieldOwner("bench-baseline")); err != nil {
			return err
		}
		svc := desired.Service(m, false)
		svc.OwnerReferences = nil
		return c.Apply(ctx, svc, client.FieldOwner("bench-baseline"))
	})
	if err != nil {
		return 0, nil, err
	}
	if err := waitRolledOut(ctx, watch, ns, n, 1); err != nil {
		return 0, nil, err
	}
	took, cpu := time.Since(start), since(procs.cpu(), cpu0)
	return took, cpu, deleteNamespace(ctx, c, ns)
}

// floor is what a perfect client costs: it does itself the work the
// operator does, with nothing reconciling.
type floor struct {
	create, scale       time.Duration
	createCPU, scaleCPU map[string]float64
	// stopped says why the floor stopped before converging, if it did.
	stopped string
}

// runFloor creates n Memcacheds of size 1 and, for each, the StatefulSet
// and Service the operator would make, owned by it; then scales each to 2
// as the operator would (the Memcached's size, the StatefulSet's replicas,
// a PodDisruptionBudget). Each step waits until every StatefulSet has
// rolled out. Nothing reconciles the Memcacheds meanwhile: no status is
// written. The CRD must be installed.
//
// With createOnly, it stops after the create, or at limit with what had
// rolled out by then (f.stopped).
func runFloor(ctx context.Context, cfg *rest.Config, c client.Client, n int, procs processes, createOnly bool, limit time.Duration) (floor, error) {
	var f floor
	ns := "floor"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return f, err
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	watch, err := watchNamespace(watchCtx, cfg, ns)
	if err != nil {
		return f, err
	}
	if err := watch.List(ctx, &appsv1.StatefulSetList{}, client.InNamespace(ns)); err != nil {
		return f, err
	}
	step := func(size int32, work func(name string) error) (time.Duration, map[string]float64, error) {
		start, cpu0 := time.Now(), procs.cpu()
		if err := parallel(names("cache", n), work); err != nil {
			return 0, nil, err
		}
		waitCtx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		if err := waitRolledOut(waitCtx, watch, ns, n, size); err != nil {
			if waitCtx.Err() == nil {
				return 0, nil, err
			}
			f.stopped = fmt.Sprintf("%s after %s: %s", "stopped", limit, err)
		}
		return time.Since(start), since(procs.cpu(), cpu0), nil
	}
	f.create, f.createCPU, err = step(1, func(name string) error { return createAsFloor(ctx, c, ns, name) })
	if err != nil || createOnly || f.stopped != "" {
		// The cluster goes with the run.
		return f, err
	}
	f.scale, f.scaleCPU, err = step(2, func(name string) error { return scaleAsFloor(ctx, c, watch, ns, name) })
	if err != nil {
		return f, err
	}
	return f, deleteNamespace(ctx, c, ns)
}

// floorOwner is the field manager of the floor's writes.
const floorOwner = client.FieldOwner("bench-floor")

// createAsFloor creates the Memcached name and applies its StatefulSet and
// Service, as an operator would at the least.
func createAsFloor(ctx context.Context, c client.Client, ns, name string) error {
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
	if err := c.Create(ctx, m); err != nil {
		return err
	}
	if err := c.Apply(ctx, desired.StatefulSet(m, floorImages, desired.SecretDigests{}), floorOwner, client.ForceOwnership); err != nil {
		return err
	}
	return c.Apply(ctx, desired.Service(m, false), floorOwner, client.ForceOwnership)
}

// scaleAsFloor scales the Memcached name to 2 and applies its StatefulSet
// and budget, as an operator would at the least.
func scaleAsFloor(ctx context.Context, c client.Client, watch client.Reader, ns, name string) error {
	m := &cachev1alpha1.Memcached{}
	if err := watchedGet(ctx, watch, c, client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
		return err
	}
	if err := c.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":2}}`))); err != nil {
		return err
	}
	if err := c.Apply(ctx, desired.StatefulSet(m, floorImages, desired.SecretDigests{}), floorOwner, client.ForceOwnership); err != nil {
		return err
	}
	return c.Apply(ctx, desired.PodDisruptionBudget(m), floorOwner, client.ForceOwnership)
}

// floorImages are the images of the floor's StatefulSets.
var floorImages = desired.Images{Memcached: desired.DefaultImage}

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
