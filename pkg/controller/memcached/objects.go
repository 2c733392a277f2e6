package memcached

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/status"
)

// ownedKind is a kind of object the operator makes for a Memcached, named
// after it (with the descriptor's suffix) and controlled by it.
type ownedKind struct{ owned.Descriptor }

// kindOf is the ownedKind of k, one of owned.Kinds.
func kindOf(k owned.Kind) ownedKind {
	d, ok := owned.Describe(k)
	if !ok {
		panic(fmt.Sprintf("%s is not one of owned.Kinds", k))
	}
	return ownedKind{d}
}

// key is the key of m's object of kind k.
func (k ownedKind) key(m *cachev1alpha1.Memcached) client.ObjectKey {
	return client.ObjectKey{Namespace: m.Namespace, Name: m.Name + k.Suffix}
}

var (
	statefulSets         = kindOf(owned.KindStatefulSet)
	deployments          = kindOf(owned.KindDeployment)
	services             = kindOf(owned.KindService)
	podDisruptionBudgets = kindOf(owned.KindPodDisruptionBudget)
	networkPolicies      = kindOf(owned.KindNetworkPolicy)
	configMaps           = kindOf(owned.KindConfigMap)
	serviceMonitors      = kindOf(owned.KindServiceMonitor)
)

// outcome is what a phase did with one object.
type outcome struct {
	// obj summarizes the object as the apiserver holds it after the phase
	// (as it was before, when the apply failed), when it exists and is the
	// Memcached's; nil otherwise.
	obj *owned.Summary
	// changed: the apply created or changed the object.
	changed bool
	// notOwned: an object of that name exists that the Memcached does not
	// control; it was left alone.
	notOwned bool
	// report is what to tell of the change in the reconcile's event; empty
	// when there is nothing to tell there.
	report report
}

// ensure applies want, the object of kind k that the Memcached should have,
// when what FieldManager owns of the current object differs from it, and
// does nothing to an object of that name that the Memcached does not
// control.
func (s *scope) ensure(ctx context.Context, k ownedKind, want runtime.ApplyConfiguration) (outcome, error) {
	current, out, err := s.currentReportingForeign(ctx, k)
	if err != nil || out.notOwned {
		return out, err
	}
	return s.apply(ctx, k, current, want)
}

// currentReportingForeign returns the summary of the object of kind k with
// the Memcached's name (nil when none exists). One the Memcached does not
// control is left alone, and reported at once: in an event, and by the
// outcome's notOwned.
func (s *scope) currentReportingForeign(ctx context.Context, k ownedKind) (*owned.Summary, outcome, error) {
	var out outcome
	current, err := s.current(ctx, k)
	if err != nil {
		return nil, out, err
	}
	if current != nil && !metav1.IsControlledBy(current, s.m) {
		ctrl.LoggerFrom(ctx).Info("Leaving alone an object not controlled by the Memcached", "kind", k.Kind)
		foreignObjectsRefused.WithLabelValues(string(k.Kind)).Inc()
		s.Recorder.Eventf(s.m, current, corev1.EventTypeWarning, status.NotOwnedReason(k.Kind), "Refuse",
			"%s %s exists and is not controlled by this Memcached; leaving it alone", k.Kind, current.GetName())
		out.notOwned = true
	}
	return current, out, nil
}

// current returns the summary of the object of kind k with the Memcached's
// name, or nil when none exists, from the store, without a request: the
// store holds the operator's objects (labelled), as the operator's last
// apply made them though its watch has not shown that yet, and the names
// of all others. The object is read from the apiserver, whole, only when
// it is the Memcached's but lost the operator's label.
func (s *scope) current(ctx context.Context, k ownedKind) (*owned.Summary, error) {
	key := k.key(s.m)
	sum, found, err := s.Owned.Get(k.Kind, key)
	if err != nil || found {
		return sum, err
	}
	other, found, err := s.Owned.Other(k.Kind, key)
	switch {
	case err != nil || !found:
		return nil, err
	case !metav1.IsControlledBy(other, s.m):
		return &owned.Summary{TypeMeta: metav1.TypeMeta{Kind: string(k.Kind)}, ObjectMeta: other.ObjectMeta}, nil
	}
	obj := k.New()
	err = s.APIReader.Get(ctx, key, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("getting %s %s: %w", k.Kind, key.Name, err)
	}
	return owned.Summarize(obj, s.Schemas)
}

// remove deletes the Memcached's object of kind k when it exists and the
// Memcached controls it; an object of that name that the Memcached does
// not control is not its business. It looks in the store only, so that a
// Memcached at rest costs no request.
func (s *scope) remove(ctx context.Context, k ownedKind) error {
	m := s.m
	current, found, err := s.Owned.Get(k.Kind, k.key(m))
	switch {
	case err != nil:
		return fmt.Errorf("getting %s %s: %w", k.Kind, k.key(m).Name, err)
	case !found || !metav1.IsControlledBy(current, m):
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("Deleting object", "kind", k.Kind)
	obj := k.New()
	obj.SetNamespace(current.Namespace)
	obj.SetName(current.Name)
	uid := current.UID
	err = s.Client.Delete(ctx, obj, client.Preconditions{UID: &uid})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("deleting %s %s: %w", k.Kind, k.key(m).Name, err)
	}
	note := fmt.Sprintf("deleted %s %s", k.Kind, k.key(m).Name)
	if k.Kind == owned.KindPodDisruptionBudget {
		note += fmt.Sprintf(" (size is %d)", desired.Replicas(m))
	}
	s.reports = append(s.reports, report{reason: eventDeleted, note: note, obj: current})
	return nil
}

// describe says what an apply that changed an object did, for the
// reconcile's event: created, scaled or updated. A drift correction that
// did not scale is told by its own event, so it reports nothing here.
func describe(m *cachev1alpha1.Memcached, kind owned.Kind, before, after *owned.Summary, driftCorrected bool) report {
	if before == nil {
		note := fmt.Sprintf("created %s %s", kind, after.Name)
		if kind == owned.KindStatefulSet {
			note += fmt.Sprintf(" with %d replicas", desired.Replicas(m))
		}
		return report{reason: eventCreated, note: note, obj: after}
	}
	if kind == owned.KindStatefulSet && before.DesiredReplicas() != after.DesiredReplicas() {
		return report{reason: eventScaled, note: fmt.Sprintf("scaled StatefulSet %s from %d to %d replicas", after.Name, before.DesiredReplicas(), after.DesiredReplicas()), obj: after}
	}
	if driftCorrected {
		return report{}
	}
	return report{reason: eventUpdated, note: fmt.Sprintf("updated %s %s", kind, after.Name), obj: after}
}
