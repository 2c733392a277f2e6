package memcached

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/reconnect"
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
	{"PodDisruptionBudget", applyWhileWanted(podDisruptionBudgets, desired.WantsPodDisruptionBudget,
		func(s *scope) runtime.ApplyConfiguration { return desired.PodDisruptionBudget(s.m) })},
	{"NetworkPolicy", applyWhileWanted(networkPolicies, desired.WantsNetworkPolicy,
		func(s *scope) runtime.ApplyConfiguration { return desired.NetworkPolicy(s.m, s.replacing) })},
	{"ServiceMonitor", reconcileServiceMonitor},
	{"membership", reconcileMembership},
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
	// The pods are those of the StatefulSet the store holds (none before
	// it is made): what they say decides the StatefulSet's phase.
	set, found, err := s.Owned.Get(owned.KindStatefulSet, client.ObjectKeyFromObject(s.m))
	if err == nil && found && metav1.IsControlledBy(set, s.m) {
		s.obs.Pods, err = s.Owned.Pods(s.m.Namespace, set.UID)
	}
	if err != nil {
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

// reconcileResult is what a reconcile that asked to look again at result and
// failed with errs returns to controller-runtime. A failure is retried
// with the controller's backoff, which doubles up to minutes; one that
// only a spec change can fix is terminal; and while the apiserver cannot
// be reached at all, the reconcile looks again every reconnect.MaxDelay,
// as the informers do, so its changes are applied within seconds of the
// apiserver's return rather than after a backoff that grew all through
// the outage.
func reconcileResult(ctx context.Context, result ctrl.Result, errs []error) (ctrl.Result, error) {
	switch {
	case len(errs) == 0:
		return result, nil
	case allRefused(errs):
		// Only a spec change can fix it, and a spec change is an event.
		return ctrl.Result{}, reconcile.TerminalError(errors.Join(errs...))
	case allUnreachable(errs):
		ctrl.LoggerFrom(ctx).Info("Cannot reach the apiserver; looking again soon", "after", reconnect.MaxDelay, "err", errors.Join(errs...))
		return ctrl.Result{RequeueAfter: reconnect.MaxDelay}, nil
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// sooner is the result that looks again first: a requeue at all before
// none, and the shorter of two.
func sooner(a, b ctrl.Result) ctrl.Result {
	if a.RequeueAfter == 0 || (b.RequeueAfter > 0 && b.RequeueAfter < a.RequeueAfter) {
		return b
	}
	return a
}

// refusedError is the apiserver's refusal of an object as the operator
// built it (invalid, or a bad request): retrying sends the same, so only a
// spec change can fix it.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

func allRefused(errs []error) bool {
	for _, err := range errs {
		if refused := (*refusedError)(nil); !errors.As(err, &refused) {
			return false
		}
	}
	return true
}

func allUnreachable(errs []error) bool {
	for _, err := range errs {
		if !reconnect.Unreachable(err) {
			return false
		}
	}
	return true
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
	if hold := status.Hold(s.m, s.obs, s.now()); hold > 0 {
		// Anything written to the status now would be stale within
		// moments, and say nothing a reader of the status lacks: until
		// then observedGeneration lags, which reads as "in progress".
		return ctrl.Result{RequeueAfter: hold}, nil
	}
	return ctrl.Result{}, s.applyStatus(ctx)
}

// reconcileMembership applies the ConfigMap of the membership m's
// discovery endpoint serves, from m's size and the addresses its pods have
// or last had (desired.Membership), while its pods serve the endpoint; and
// deletes it otherwise.
func reconcileMembership(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !desired.RunsDiscovery(s.m, s.Images) {
		return ctrl.Result{}, s.remove(ctx, configMaps)
	}
	current, out, err := s.currentReportingForeign(ctx, configMaps)
	if err != nil || out.notOwned {
		s.observe(owned.KindConfigMap, out)
		return ctrl.Result{}, err
	}
	// A membership that does not parse (edited by hand), or that the
	// operator did not publish, is made anew.
	st := membershipOf(current, s.told())
	// A pod's address is published once it is ready: clients reach a new
	// slot, or a slot's new pod, only once memcached serves there (until
	// then a slot keeps the address published last, if any).
	ips := map[string]string{}
	for _, p := range s.obs.Pods {
		if p.IP != "" && p.Ready {
			ips[p.Name] = p.IP
		}
	}
	membership := desired.Membership(s.m, ips, st.published)
	var plan string
	var res ctrl.Result
	if s.movesKeys() {
		if membership, plan, res, err = s.moveStep(ctx, st, membership, ips); err != nil {
			return ctrl.Result{}, err
		}
	}
	out, err = s.apply(ctx, configMaps, current, desired.MembershipConfigMap(s.m, membership, plan))
	s.observe(owned.KindConfigMap, out)
	s.obs.Discovery = out.obj != nil
	if err == nil && out.obj != nil {
		s.published(membership, plan)
	}
	return res, err
}

// published records membership and plan as what the ConfigMap holds: the
// operator's word on it (publishedSeals), what the pods are to be told,
// and the move under way for the status.
func (s *scope) published(membership discovery.Cluster, plan string) {
	seal := discovery.SealOf(membership.Body(), []byte(plan))
	s.publishedSeals.Store(client.ObjectKeyFromObject(s.m), publishedSeal{uid: s.m.UID, seal: seal, version: membership.Version})
	s.tell.seal = seal.String()
	s.tell.membership = strconv.FormatInt(membership.Version, 10)
	if plan != "" {
		// The pods follow the plan's steps as they follow the
		// membership: told of each.
		p, from, to, _ := move.ParsePlan([]byte(plan))
		s.tell.membership += fmt.Sprintf(" (move %d: %s)", p.ID, p.Step)
		s.obs.Moving = movingMessage(p, from, to)
	}
}

// podNews is what the pods mount from ConfigMaps and Secrets, as the
// operator tells them of it: the membership's version and seal, the
// Secret content's digest.
type podNews struct{ membership, seal, secrets string }

// tellPods sets, on each pod that says otherwise, the membership's version
// (desired.AnnotationMembershipVersion) and the digest of the Secret
// content its reloader renews in place (desired.AnnotationSecretsDigest).
// The kubelet writes a ConfigMap's or a Secret's new content to a pod at
// its periodic sync of the pod (a minute or more), and at once when the
// pod itself changes: so every pod serves a new membership, and loads new
// certificates and passwords, within moments. One patch per pod per
// change; none when nothing changed.
func tellPods(ctx context.Context, s *scope) (ctrl.Result, error) {
	var errs []error
	for _, p := range s.obs.Pods {
		if p.Deleting || p.IP == "" {
			// A pod not running yet mounts the content there is when it
			// starts; it is told once it runs, if that changed.
			continue
		}
		news := map[string]string{}
		if v := s.tell.membership; v != "" && p.MembershipVersion != v {
			news[desired.AnnotationMembershipVersion] = v
		}
		if v := s.tell.seal; v != "" && p.MembershipSeal != v {
			news[desired.AnnotationMembershipSeal] = v
		}
		if d := s.tell.secrets; d != "" && p.SecretsDigest != d {
			news[desired.AnnotationSecretsDigest] = d
		}
		if len(news) == 0 {
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			// Of this pod, not a successor of its name: the apiserver
			// refuses a patch that changes the UID.
			"uid":         p.UID,
			"annotations": news,
		}})
		if err != nil {
			return ctrl.Result{}, err
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		err = s.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(owned.FieldManager))
		switch {
		case apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsInvalid(err):
			// Gone or replaced: its successor mounts the new content.
		case err != nil:
			errs = append(errs, fmt.Errorf("telling pod %s of what it mounts: %w", p.Name, err))
		}
	}
	return ctrl.Result{}, errors.Join(errs...)
}
