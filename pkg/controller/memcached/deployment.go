package memcached

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

// replaceRecheckInterval is how often a Memcached whose Deployment is being
// replaced is looked at again, until the replaced Deployment is gone.
const replaceRecheckInterval = time.Second

// reconcileDeployment is the Deployment's phase: it follows the Secrets m
// names and learns what the pods would mount from them, then, in this
// order,
//   - leaves alone a Deployment of m's name that m does not control;
//   - without Reconciler.TakeOver, leaves alone and says why one m
//     controls that selects pods otherwise or that the operator never
//     applied: another operator's (the tutorial's);
//   - replaces one m controls that selects pods otherwise (below);
//   - holds the Deployment as it is while a Secret is unusable (the gate:
//     pods that cannot mount what they need would never start);
//   - applies m's Deployment, first adopting in place one that selects m's
//     pods but that the operator never applied.
func reconcileDeployment(ctx context.Context, s *scope) (ctrl.Result, error) {
	s.Secrets.Follow(client.ObjectKeyFromObject(s.m), secretNames(s.m)...)
	mounted, err := s.mountedSecrets()
	switch {
	case errors.Is(err, errSecretsPending):
		// The Secrets' watches tell when they have listed; this is the
		// safety net.
		s.secretsPending = true
		return ctrl.Result{RequeueAfter: secretsPendingRecheck}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	s.obs.Secret = mounted.problem
	s.obs.Certificate = mounted.certificate
	s.recheck = mounted.recheck
	current, dep, err := s.currentReportingForeign(ctx, deployments)
	switch {
	case err != nil:
	case dep.notOwned:
	case current != nil && (!selectsOwnPods(current, s.m) || current.LastApplied() == nil) && !s.TakeOver:
		dep.obj = current
		s.obs.TakeOverDisabled = s.refuseReplacing(current)
	case current != nil && !selectsOwnPods(current, s.m):
		dep.obj = current
		s.obs.Replacing, err = s.replace(ctx, current)
	case mounted.problem != nil:
		dep.obj = current
	default:
		dep, err = s.applyDeployment(ctx, current, mounted.digests)
	}
	s.obs.Deployment = dep.obj
	s.obs.DeploymentChanged = dep.changed
	s.observe(owned.KindDeployment, dep)
	return s.deploymentRecheck(), err
}

// applyDeployment applies m's Deployment over current (nil when there is
// none), first adopting in place one that selects m's pods but that the
// operator never applied (with TakeOver only): the Memcached's status and
// finalizer, and the Deployment's fields, are taken over as in a
// replacement.
func (s *scope) applyDeployment(ctx context.Context, current *owned.Summary, digests desired.SecretDigests) (outcome, error) {
	if current != nil && current.LastApplied() == nil {
		if err := s.adoptFieldManagers(ctx); err != nil {
			return outcome{obj: current}, err
		}
		if err := s.adoptDeploymentManagers(ctx, current); err != nil {
			return outcome{obj: current}, err
		}
	}
	return s.apply(ctx, deployments, current, desired.Deployment(s.m, s.Images, s.restartFor(current, digests)))
}

// deploymentRecheck is when to look at the Deployment again though no
// event comes: while a replaced Deployment, outside the store, is going,
// and when the certificate's time says something new (the wait costs no
// request).
func (s *scope) deploymentRecheck() ctrl.Result {
	var res ctrl.Result
	if s.obs.Replacing != "" {
		res.RequeueAfter = replaceRecheckInterval
	}
	if !s.recheck.IsZero() {
		res = sooner(res, ctrl.Result{RequeueAfter: max(s.recheck.Sub(s.now())+time.Second, time.Second)})
	}
	return res
}

// A Memcached may control a Deployment that the operator did not make, or
// made with another selector: the Operator SDK tutorial's operator, which
// this one replaces, selects pods by labels every one of its Memcacheds
// shares. A selector cannot change, so such a Deployment is replaced, without
// a moment with fewer ready pods than its replicas:
//
//  1. it is paused, so that its controller makes no new ReplicaSet;
//  2. once its controller has seen that, its ReplicaSets are given the
//     operator's labels for the Memcached: its controller releases them, and
//     no other Deployment selecting the old labels (the tutorial's other
//     Memcacheds in the namespace) can adopt them; their pods keep running;
//  3. it is deleted, orphaning what it still owns;
//  4. the operator's Deployment is applied as for any Memcached: its
//     controller adopts the released ReplicaSets (their labels match its
//     selector) and rolls their pods over to new ones the way every change
//     rolls (one extra pod at a time, none removed before its replacement
//     is ready).
//
// With step 1, the field managers the tutorial wrote the Memcached's status
// with (Update) are folded into the operator's status manager, so that no
// stale owner keeps a condition the operator manages, and the tutorial's
// finalizer, which nothing would remove any more, is removed.

// tutorialFinalizer is the finalizer the Operator SDK tutorial's operator
// puts on every Memcached.
const tutorialFinalizer = "cache.example.com/finalizer"

// eventReplacing is the event reason of a replacement.
const eventReplacing = "ReplacingDeployment"

// selectsOwnPods tells whether d selects pods as the operator's Deployment
// for m does.
func selectsOwnPods(d *owned.Summary, m *cachev1alpha1.Memcached) bool {
	sel := d.Selector
	return sel != nil && len(sel.MatchExpressions) == 0 && maps.Equal(sel.MatchLabels, desired.SelectorLabels(m))
}

// eventTakeOverDisabled is the event reason of a Deployment left alone
// because the operator may not take over.
const eventTakeOverDisabled = "TakeOverDisabled"

// refuseReplacing says why old, m's Deployment that another operator made,
// is left as it is: the operator runs without --take-over. It sends
// nothing to the apiserver but the event.
func (s *scope) refuseReplacing(old *owned.Summary) string {
	what := fmt.Sprintf("selects pods by %s, not by this Memcached's own labels", metav1.FormatLabelSelector(old.Selector))
	if selectsOwnPods(old, s.m) {
		what = "was made by another operator (this one never applied it)"
	}
	msg := fmt.Sprintf("Deployment %s %s, and taking it over needs the operator's --take-over flag and its role (manifests/takeover, or the chart's takeover.enabled): it is left as it is, its pods serving",
		old.Name, what)
	s.Recorder.Eventf(s.m, old, corev1.EventTypeWarning, eventTakeOverDisabled, "Refuse", "%s", msg)
	return msg
}

// replace takes one step of replacing old, m's Deployment that selects pods
// otherwise, and says where the replacement stands.
func (s *scope) replace(ctx context.Context, old *owned.Summary) (string, error) {
	m := s.m
	log := ctrl.LoggerFrom(ctx)
	live := &appsv1.Deployment{}
	if err := s.APIReader.Get(ctx, client.ObjectKeyFromObject(old), live); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone since it was looked up: the next reconcile makes the new one.
			return fmt.Sprintf("Deployment %s is deleted; the new one is made next", old.Name), nil
		}
		return "", fmt.Errorf("getting Deployment %s: %w", old.Name, err)
	}
	selector := metav1.FormatLabelSelector(live.Spec.Selector)
	note := fmt.Sprintf("Deployment %s selects pods by %s, not by this Memcached's own labels: replacing it; its %d ready pods serve until as many new ones are ready",
		live.Name, selector, live.Status.ReadyReplicas)

	if !live.Spec.Paused {
		if err := s.adoptFieldManagers(ctx); err != nil {
			return "", err
		}
		log.Info("Pausing a Deployment to replace it", "selector", selector)
		pause := appsv1ac.Deployment(live.Name, live.Namespace).WithUID(live.UID).
			WithSpec(appsv1ac.DeploymentSpec().WithPaused(true))
		if err := s.Client.Apply(ctx, pause, client.FieldOwner(owned.FieldManager), client.ForceOwnership); err != nil {
			return "", fmt.Errorf("pausing Deployment %s: %w", live.Name, err)
		}
		appliesSent.WithLabelValues(string(owned.KindDeployment)).Inc()
		s.Recorder.Eventf(m, live, corev1.EventTypeNormal, eventReplacing, "Replace", "%s", note)
		return note, nil
	}
	if live.Status.ObservedGeneration < live.Generation {
		// Its controller has not seen the pause yet: releasing its
		// ReplicaSets now would make it create a new one.
		return note, nil
	}

	replicaSets, err := s.ownedReplicaSets(ctx, live)
	if err != nil {
		return "", err
	}
	for _, rs := range replicaSets {
		log.Info("Giving a ReplicaSet this Memcached's labels", "replicaSet", klog.KObj(&rs))
		relabel := appsv1ac.ReplicaSet(rs.Name, rs.Namespace).WithUID(rs.UID).WithLabels(desired.Labels(m))
		if err := s.Client.Apply(ctx, relabel, client.FieldOwner(owned.FieldManager), client.ForceOwnership); err != nil {
			return "", fmt.Errorf("labelling ReplicaSet %s: %w", rs.Name, err)
		}
	}
	log.Info("Deleting the replaced Deployment, orphaning its ReplicaSets", "replicaSets", len(replicaSets))
	uid := live.UID
	err = s.Client.Delete(ctx, live, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationOrphan))
	if err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("deleting Deployment %s: %w", live.Name, err)
	}
	return fmt.Sprintf("Deployment %s, which selected pods by %s, is deleted; its %d pods serve until the new Deployment has replaced them", live.Name, selector, old.DesiredReplicas()), nil
}

// adoptDeploymentManagers folds the Update field managers
// r.ReplacedManagers of d, m's Deployment that selects its pods as the
// operator does but that the operator never applied, into the operator's
// field manager, before the operator's first apply: the Deployment is
// adopted in place (one rollout at most, when the pod template differs).
func (s *scope) adoptDeploymentManagers(ctx context.Context, d *owned.Summary) error {
	live := &appsv1.Deployment{}
	if err := s.APIReader.Get(ctx, client.ObjectKeyFromObject(d), live); err != nil {
		return client.IgnoreNotFound(err)
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(s.ReplacedManagers...), owned.FieldManager)
	if err != nil || patch == nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Folding the replaced operator's field managers of a Deployment into the operator's", "managers", s.ReplacedManagers)
	if err := s.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("upgrading the field managers of Deployment %s: %w", d.Name, err)
	}
	return nil
}

// ownedReplicaSets are the ReplicaSets d controls.
func (s *scope) ownedReplicaSets(ctx context.Context, d *appsv1.Deployment) ([]appsv1.ReplicaSet, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("the selector of Deployment %s: %w", d.Name, err)
	}
	list := &appsv1.ReplicaSetList{}
	if err := s.APIReader.List(ctx, list, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing the ReplicaSets of Deployment %s: %w", d.Name, err)
	}
	return slices.DeleteFunc(list.Items, func(rs appsv1.ReplicaSet) bool { return !metav1.IsControlledBy(&rs, d) }), nil
}

// adoptFieldManagers folds the Update field managers s.ReplacedManagers
// of m's status into the operator's status manager, and removes the
// tutorial's finalizer. It reads m from the apiserver: the cache keeps no
// other manager's entries.
func (s *scope) adoptFieldManagers(ctx context.Context) error {
	m := s.m
	live := &cachev1alpha1.Memcached{}
	if err := s.APIReader.Get(ctx, client.ObjectKeyFromObject(m), live); err != nil {
		return client.IgnoreNotFound(err)
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(s.ReplacedManagers...), owned.StatusFieldManager, csaupgrade.Subresource("status"))
	if err != nil {
		return fmt.Errorf("upgrading the field managers of Memcached %s: %w", m.Name, err)
	}
	if patch != nil {
		ctrl.LoggerFrom(ctx).Info("Folding the replaced operator's status field managers into the operator's", "managers", s.ReplacedManagers)
		if err := s.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch)); err != nil {
			return fmt.Errorf("upgrading the field managers of Memcached %s: %w", m.Name, err)
		}
	}
	if i := slices.Index(live.Finalizers, tutorialFinalizer); i >= 0 {
		ctrl.LoggerFrom(ctx).Info("Removing the replaced operator's finalizer", "finalizer", tutorialFinalizer)
		path := fmt.Sprintf("/metadata/finalizers/%d", i)
		remove, err := json.Marshal([]map[string]any{
			{"op": "test", "path": path, "value": tutorialFinalizer},
			{"op": "remove", "path": path},
		})
		if err != nil {
			return err
		}
		if err := s.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, remove)); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	return nil
}

// eventReloadFailed is the event reason when a pod could not load new
// Secret content in place and the operator restarts the pods instead.
const eventReloadFailed = cachev1alpha1.ReasonReloadFailed

// restartFor completes digests with the Secret content the pods are to be
// restarted for. The pods load new content in place (the reloader); when
// one says it could not, the pods are restarted, one at a time as every
// rollout, to mount what the Secrets hold now: once per content, which
// the Deployment's template then records.
func (s *scope) restartFor(current *owned.Summary, digests desired.SecretDigests) desired.SecretDigests {
	if !desired.RunsReloader(s.m, s.Images) {
		return digests
	}
	if current != nil {
		digests.RestartedFor = current.RestartedFor
	}
	if digests.RestartedFor == digests.Combined() {
		return digests
	}
	for _, p := range s.obs.Pods {
		if p.ReloadFailed == "" {
			continue
		}
		digests.RestartedFor = digests.Combined()
		s.Recorder.Eventf(s.m, nil, corev1.EventTypeWarning, eventReloadFailed, "Restart",
			"Pod %s could not load the new Secret content in place (%s); restarting the pods one at a time to mount it", p.Name, p.ReloadFailed)
		break
	}
	return digests
}
