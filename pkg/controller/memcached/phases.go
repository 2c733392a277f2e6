package memcached

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/status"
)

// phase makes one of the Memcached's objects what the Memcached asks for
// and records what it saw of it in the scope, for the status. It returns
// when to look again though nothing changes (zero: when something does),
// and its failure, which names the object.
type phase func(ctx context.Context, s *scope) (ctrl.Result, error)

// phases are a reconcile's steps, in the order they run. Each runs whatever
// the ones before it returned: none depends on another's success, so a
// Service the apiserver refuses keeps neither the budget nor the
// NetworkPolicy from being applied, nor the status from saying so. The
// rollout reads what the StatefulSet's phase applied and saw, and does
// nothing without it. The status depends on all of them and is written
// after them, whatever they returned (writeStatus).
var phases = []struct {
	name string
	run  phase
}{
	{"StatefulSet", reconcileStatefulSet},
	// After the StatefulSet's, whose apply it brings the pods to.
	{"rollout", reconcileRollout},
	{"Service", reconcileService},
	{"NetworkPolicy", applyWhileWanted(networkPolicies, desired.WantsNetworkPolicy,
		func(s *scope) runtime.ApplyConfiguration { return desired.NetworkPolicy(s.m, s.replacing) })},
	{"ServiceMonitor", reconcileServiceMonitor},
	{"membership", reconcileMembership},
	// After the membership's, which says whether keys move.
	{"PodDisruptionBudget", applyWhileWanted(podDisruptionBudgets, desired.WantsPodDisruptionBudget,
		func(s *scope) runtime.ApplyConfiguration { return desired.Budget(s.m, s.keysMoving) })},
	// After the phases that say what the pods mount.
	{"pods", tellPods},
}

// reconcile runs every phase, then writes the status from what they saw
// (unless skipStatusReason names why not), and returns the shortest
// requeue any of them asked for and their errors joined, each wrapped with
// its phase. The errors are terminal when every one is a refusal that only
// a spec change can fix.
func (s *scope) reconcile(ctx context.Context) (ctrl.Result, error) {
	result, errs := s.runPhases(ctx)
	s.recordReports()
	if why := s.skipStatusReason(); why != "" {
		ctrl.LoggerFrom(ctx).V(1).Info("Not writing the status", "reason", why)
	} else {
		res, err := writeStatus(ctx, s)
		if err != nil {
			errs = append(errs, fmt.Errorf("status phase: %w", err))
		}
		result = sooner(result, res)
	}
	if s.gone {
		return ctrl.Result{}, nil
	}
	return reconcileResult(ctx, result, errs)
}

// runPhases reads the pods of the Memcached's StatefulSet, then runs every
// phase, until one finds the Memcached gone.
func (s *scope) runPhases(ctx context.Context) (ctrl.Result, []error) {
	// What the pods say decides the StatefulSet's phase.
	var err error
	if s.obs.Pods, err = memcachedPods(s.Owned, s.m); err != nil {
		s.unobserved = true
		return ctrl.Result{}, []error{err}
	}
	var result ctrl.Result
	var errs []error
	for _, p := range phases {
		res, err := p.run(ctx, s)
		if errors.Is(err, errMemcachedGone) {
			s.gone = true
			return ctrl.Result{}, nil
		}
		if err != nil {
			s.obs.Failed = append(s.obs.Failed, err)
			errs = append(errs, fmt.Errorf("%s phase: %w", p.name, err))
		}
		result = sooner(result, res)
	}
	return result, errs
}

// memcachedPods are m's pods as store holds them: those of the StatefulSet
// m controls, none before it is made.
func memcachedPods(store *owned.Store, m *cachev1alpha1.Memcached) ([]*owned.Pod, error) {
	set, found, err := store.Get(owned.KindStatefulSet, client.ObjectKeyFromObject(m))
	if err != nil || !found || !metav1.IsControlledBy(set, m) {
		return nil, err
	}
	return store.Pods(m.Namespace, set.UID)
}

// skipStatusReason names why a reconcile that read its Memcached writes no
// status: the only exceptions to writing it after the phases. Empty: the
// status is written (or held, see writeStatus).
func (s *scope) skipStatusReason() string {
	switch {
	case s.gone:
		return "the Memcached's namespace is being deleted: nothing more is made, and no one reads the status"
	case s.unobserved:
		return "the store of the owned objects could not be read: the phases observed nothing to report"
	case s.secretsPending:
		return "a Secret the Memcached names has not been listed yet: what its pods would mount is unknown"
	}
	return ""
}

// reconcileService applies m's headless Service: while the StatefulSet's
// phase replaces a Deployment, it selects that Deployment's pods too.
func reconcileService(ctx context.Context, s *scope) (ctrl.Result, error) {
	svc, err := s.ensure(ctx, services, desired.Service(s.m, s.replacing))
	s.obs.Service = svc.obj
	s.observe(owned.KindService, svc)
	return ctrl.Result{}, err
}

// applyWhileWanted is the phase of an object of kind k that a Memcached has
// while wanted says it asks for one: build makes it; otherwise it is
// deleted.
func applyWhileWanted(k ownedKind, wanted func(*cachev1alpha1.Memcached) bool, build func(*scope) runtime.ApplyConfiguration) phase {
	return func(ctx context.Context, s *scope) (ctrl.Result, error) {
		return ctrl.Result{}, s.ensureOrRemove(ctx, k, wanted(s.m), func() runtime.ApplyConfiguration { return build(s) })
	}
}

// reconcileServiceMonitor applies m's ServiceMonitor while m asks for
// monitoring and the cluster serves ServiceMonitors, and deletes it when m
// no longer asks.
func reconcileServiceMonitor(ctx context.Context, s *scope) (ctrl.Result, error) {
	switch {
	case !s.Schemas.ServiceMonitors():
		if desired.RunsExporter(s.m) {
			s.obs.Monitor = status.MonitorCRDMissing
		}
		return ctrl.Result{}, nil
	case !desired.RunsExporter(s.m):
		return ctrl.Result{}, s.remove(ctx, serviceMonitors)
	}
	sm, err := s.ensure(ctx, serviceMonitors, desired.ServiceMonitor(s.m))
	s.observe(owned.KindServiceMonitor, sm)
	s.obs.Monitor = status.MonitorReady
	if sm.notOwned {
		s.obs.Monitor = status.MonitorNotOwned
	}
	return ctrl.Result{}, err
}

// ensureOrRemove applies the object of kind k that build makes while
// wanted, and deletes m's object of that kind otherwise.
func (s *scope) ensureOrRemove(ctx context.Context, k ownedKind, wanted bool, build func() runtime.ApplyConfiguration) error {
	if !wanted {
		return s.remove(ctx, k)
	}
	out, err := s.ensure(ctx, k, build())
	s.observe(k.Kind, out)
	return err
}

// writeStatus applies the status computed from what the phases saw,
// unless it is held (package status decides when a status is worth
// writing).
func writeStatus(ctx context.Context, s *scope) (ctrl.Result, error) {
	if desired.Autoscales(s.m) {
		s.obs.Autoscaling = s.Autoscaler.Status(client.ObjectKeyFromObject(s.m))
	}
	if hold := status.Hold(s.m, s.obs, s.now()); hold > 0 {
		// Anything written to the status now would be stale within
		// moments, and say nothing a reader of the status lacks: until
		// then observedGeneration lags, which reads as "in progress".
		return ctrl.Result{RequeueAfter: hold}, nil
	}
	return ctrl.Result{}, s.applyStatus(ctx)
}
