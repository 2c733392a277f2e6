package memcached

import (
	"context"
	"errors"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

const (
	// replaceRecheckInterval is how often a Memcached whose Deployment is
	// being replaced is looked at again: the replaced Deployment of another
	// operator is outside the store's watch.
	replaceRecheckInterval = time.Second
	// missingPodsRecheckInterval is how often a Memcached whose
	// StatefulSet lacks pods is looked at again: a pod the StatefulSet
	// controller cannot create (a quota) changes no status, so no event
	// comes. It is also how long after the operator's last apply pods may
	// be missing before the StatefulSet's events are read for why: the
	// controller makes them within moments, so creating or scaling a
	// Memcached reads nothing.
	missingPodsRecheckInterval = 5 * time.Second
)

// reconcileStatefulSet is the StatefulSet's phase: it follows the Secrets
// m names and learns what the pods would mount from them, then, in this
// order,
//   - without Reconciler.TakeOver, leaves alone and says why a Deployment
//     m controls that the operator never applied: another operator's (the
//     tutorial's);
//   - leaves alone a StatefulSet of m's name that m does not control;
//   - holds the StatefulSet as it is while a Secret is unusable (the
//     gate: pods that cannot mount what they need would never start);
//   - applies m's StatefulSet;
//   - retires the Deployment m controls, if any, once every slot is ready
//     (replace);
//   - and, while the StatefulSet lacks pods, learns why its controller
//     cannot create them.
func reconcileStatefulSet(ctx context.Context, s *scope) (ctrl.Result, error) {
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

	old, err := s.replacedDeployment(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if old != nil && old.LastApplied() == nil && !s.TakeOver {
		s.obs.Replaced = old
		s.obs.TakeOverDisabled = s.refuseReplacing(old)
		return s.statefulSetRecheck(), nil
	}
	s.replacing = old != nil

	current, set, err := s.currentReportingForeign(ctx, statefulSets)
	switch {
	case err != nil:
	case set.notOwned:
	case mounted.problem != nil:
		set.obj = current
	case old != nil && old.LastApplied() == nil && current == nil:
		// Another operator's Memcached: its status managers and finalizer
		// are taken over with its first StatefulSet.
		if err = s.adoptFieldManagers(ctx); err != nil {
			return ctrl.Result{}, err
		}
		set, err = s.applyStatefulSet(ctx, current, mounted.digests)
	default:
		set, err = s.applyStatefulSet(ctx, current, mounted.digests)
	}
	s.obs.StatefulSet = set.obj
	s.obs.StatefulSetChanged = set.changed
	s.observe(owned.KindStatefulSet, set)
	if old != nil {
		// Its pods serve until the replacement is done, whatever stops it.
		s.obs.Replaced = old
		if err == nil && !set.notOwned {
			s.obs.Replacing, err = s.replace(ctx, old, set)
		}
	}
	if err == nil {
		s.obs.CreateFailed, err = s.createFailed(ctx, set.obj)
	}
	return s.statefulSetRecheck(), err
}

// applyStatefulSet applies the StatefulSet m asks for over current, its
// pods restarted for the Secret content digests where a reload failed, and
// sized to the slots keys move from while they move.
func (s *scope) applyStatefulSet(ctx context.Context, current *owned.Summary, digests desired.SecretDigests) (outcome, error) {
	if desired.RunsReloader(s.m, s.Images) {
		s.tell.secrets = digests.Combined()
	}
	digests = s.restartPodsOnFailedReload(current, digests)
	s.obs.RestartingForReload = digests.RestartedFor != "" && digests.RestartedFor == digests.Combined()
	s.desiredSet = desired.StatefulSet(s.m, s.Images, digests)
	if n := s.slots(ctx); n != desired.Replicas(s.m) {
		// Slots keys move from serve until they have moved.
		s.desiredSet.Spec.WithReplicas(n)
	}
	return s.apply(ctx, statefulSets, current, s.desiredSet)
}

// statefulSetRecheck is when to look at the StatefulSet again though no
// event comes: while a replaced Deployment is going, while pods are
// missing, and when the certificate's time says something new (the wait
// costs no request).
func (s *scope) statefulSetRecheck() ctrl.Result {
	var res ctrl.Result
	if s.obs.Replacing != "" {
		res.RequeueAfter = replaceRecheckInterval
	}
	if d := s.obs.StatefulSet; d != nil && missingPods(d) {
		res = sooner(res, ctrl.Result{RequeueAfter: max(s.missingSince(d), time.Second)})
	}
	if !s.recheck.IsZero() {
		res = sooner(res, ctrl.Result{RequeueAfter: max(s.recheck.Sub(s.now())+time.Second, time.Second)})
	}
	return res
}
