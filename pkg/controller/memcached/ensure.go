package memcached

import (
	"context"
	"fmt"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1ac "github.com/prometheus-operator/prometheus-operator/pkg/client/applyconfiguration/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/jsonconv"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

// ownedKind is a kind of object the operator makes for a Memcached, named
// after it and controlled by it.
type ownedKind[T client.Object, A runtime.ApplyConfiguration] struct {
	kind owned.Kind
	// notOwned is the condition reason and event reason when an object of
	// this kind and the Memcached's name is not the Memcached's.
	notOwned string
	newObj   func() T
}

var (
	deployments = ownedKind[*appsv1.Deployment, *appsv1ac.DeploymentApplyConfiguration]{
		kind:     owned.KindDeployment,
		notOwned: cachev1alpha1.ReasonDeploymentNotOwned,
		newObj:   func() *appsv1.Deployment { return &appsv1.Deployment{} },
	}
	services = ownedKind[*corev1.Service, *corev1ac.ServiceApplyConfiguration]{
		kind:     owned.KindService,
		notOwned: cachev1alpha1.ReasonServiceNotOwned,
		newObj:   func() *corev1.Service { return &corev1.Service{} },
	}
	podDisruptionBudgets = ownedKind[*policyv1.PodDisruptionBudget, *policyv1ac.PodDisruptionBudgetApplyConfiguration]{
		kind:     owned.KindPodDisruptionBudget,
		notOwned: cachev1alpha1.ReasonPodDisruptionBudgetNotOwned,
		newObj:   func() *policyv1.PodDisruptionBudget { return &policyv1.PodDisruptionBudget{} },
	}
	serviceMonitors = ownedKind[*monitoringv1.ServiceMonitor, *monitoringv1ac.ServiceMonitorApplyConfiguration]{
		kind:     owned.KindServiceMonitor,
		notOwned: cachev1alpha1.ReasonServiceMonitorNotOwned,
		newObj:   func() *monitoringv1.ServiceMonitor { return &monitoringv1.ServiceMonitor{} },
	}
)

// outcome is what ensure did with one object.
type outcome struct {
	// obj summarizes the object as the apiserver holds it after ensure,
	// when it exists and is the Memcached's; nil otherwise.
	obj *owned.Summary
	// changed: the apply created or changed the object.
	changed bool
	// notOwned: an object of that name exists that the Memcached does not
	// control; it was left alone.
	notOwned bool
	// refused is the apiserver's refusal of the apply, naming the object.
	refused error
	// report is what to tell of the change in the reconcile's event; empty
	// when there is nothing to tell there.
	report report
}

// report is one object created, scaled, updated or deleted by a reconcile,
// as the reconcile's event tells it.
type report struct {
	reason string // an event reason: eventCreated, eventScaled, ...
	note   string // lower-case, to be joined with others
	obj    client.Object
}

// scope is one reconcile of one Memcached: what ensure and remove share.
type scope struct {
	r *Reconciler
	m *cachev1alpha1.Memcached
}

// ensure applies want, the object of kind k that the Memcached should have,
// when what FieldManager owns of the current object differs from it, and
// does nothing to an object of that name that the Memcached does not
// control. It records an event at once for a foreign object and for
// restored drift; what else it changed is in the outcome's report.
func ensure[T client.Object, A runtime.ApplyConfiguration](ctx context.Context, s *scope, k ownedKind[T, A], want A) (outcome, error) {
	current, out, err := find(ctx, s, k)
	if err != nil || out.notOwned {
		return out, err
	}
	return update(ctx, s, k, current, want)
}

// update applies want over current, the Memcached's object of kind k (nil
// when there is none), when what FieldManager owns of it differs.
func update[T client.Object, A runtime.ApplyConfiguration](ctx context.Context, s *scope, k ownedKind[T, A], current *owned.Summary, want A) (outcome, error) {
	r, m := s.r, s.m
	log := ctrl.LoggerFrom(ctx)
	var out outcome

	var lostTo []string
	if current != nil {
		same, err := current.AppliesNothing(want)
		if err != nil {
			return out, err
		}
		if same {
			appliesSkipped.WithLabelValues(string(k.kind)).Inc()
			out.obj = current
			return out, nil
		}
		if lostTo, err = whoChanged(ctx, r, k, current, want); err != nil {
			return out, err
		}
	}
	// A Memcached deleted after the cache last saw it gets its objects
	// created all the same, owned by a UID that no longer exists: the
	// garbage collector deletes them (TestObjectsOfADeletedMemcachedAreCollected).
	// Reading the Memcached before each creation to prevent that cost a
	// request per created object.

	// What the object's digest will be, if the apply creates it.
	var createdDigest owned.Digest
	if current == nil {
		var err error
		if createdDigest, err = owned.DigestOf(want); err != nil {
			return out, err
		}
	}
	log.Info("Applying object", "kind", k.kind, "object", klog.KObj(m))
	err := r.Client.Apply(ctx, want, client.FieldOwner(owned.FieldManager), client.ForceOwnership)
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace is going away, and the Memcached with it: nothing
		// to create, and no status worth writing.
		log.V(1).Info("Not applying: the namespace is terminating", "kind", k.kind)
		return out, errMemcachedGone
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		log.Error(err, "The apiserver refused the object", "kind", k.kind)
		r.Recorder.Eventf(m, nil, corev1.EventTypeWarning, eventApplyRejected, "Apply",
			"The apiserver refused %s %s: %v", k.kind, m.Name, err)
		out.refused = fmt.Errorf("%s %s: %w", k.kind, m.Name, err)
		return out, nil
	case err != nil:
		return out, fmt.Errorf("applying %s %s: %w", k.kind, m.Name, err)
	}
	appliesSent.WithLabelValues(string(k.kind)).Inc()

	// Apply wrote the apiserver's answer into want.
	applied, err := answer(k, want)
	if err != nil {
		return out, err
	}
	out.obj = applied
	if current == nil {
		r.Owned.Created(applied, createdDigest)
	}
	out.changed = current == nil || applied.ResourceVersion != current.ResourceVersion
	if !out.changed {
		return out, nil
	}
	if len(lostTo) > 0 {
		driftCorrected.WithLabelValues(string(k.kind)).Inc()
		r.Recorder.Eventf(m, applied, corev1.EventTypeNormal, eventDriftCorrected, "CorrectDrift",
			"Restored fields of %s %s changed by %v", k.kind, applied.Name, lostTo)
	}
	out.report = describe(m, k.kind, current, applied, len(lostTo) > 0)
	return out, nil
}

// find looks up the object of kind k with the Memcached's name. One the
// Memcached does not control is left alone, and reported at once: in an
// event, and by the outcome's notOwned.
func find[T client.Object, A runtime.ApplyConfiguration](ctx context.Context, s *scope, k ownedKind[T, A]) (*owned.Summary, outcome, error) {
	r, m := s.r, s.m
	var out outcome
	current, err := lookup(ctx, r, k, m)
	if err != nil {
		return nil, out, err
	}
	if current != nil && !metav1.IsControlledBy(current, m) {
		ctrl.LoggerFrom(ctx).Info("Leaving alone an object not controlled by the Memcached", "kind", k.kind, "object", klog.KObj(current))
		foreignObjectsRefused.WithLabelValues(string(k.kind)).Inc()
		r.Recorder.Eventf(m, current, corev1.EventTypeWarning, k.notOwned, "Refuse",
			"%s %s exists and is not controlled by this Memcached; leaving it alone", k.kind, current.GetName())
		out.notOwned = true
	}
	return current, out, nil
}

// answer is the summary of the apiserver's answer to an apply, which
// Client.Apply decoded into want.
func answer[T client.Object, A runtime.ApplyConfiguration](k ownedKind[T, A], want A) (*owned.Summary, error) {
	obj := k.newObj()
	if err := jsonconv.Convert(want, obj); err != nil {
		return nil, err
	}
	return owned.Observed(obj)
}

// remove deletes the Memcached's object of kind k when it exists and the
// Memcached controls it; an object of that name that the Memcached does
// not control is not its business. It looks in the store only, so that a
// Memcached at rest costs no request.
func remove[T client.Object, A runtime.ApplyConfiguration](ctx context.Context, s *scope, k ownedKind[T, A]) (report, error) {
	r, m := s.r, s.m
	current, found, err := r.Owned.Get(k.kind, client.ObjectKeyFromObject(m))
	switch {
	case err != nil:
		return report{}, fmt.Errorf("getting %s %s: %w", k.kind, m.Name, err)
	case !found || !metav1.IsControlledBy(current, m):
		return report{}, nil
	}
	ctrl.LoggerFrom(ctx).Info("Deleting object", "kind", k.kind, "object", klog.KObj(current))
	obj := k.newObj()
	obj.SetNamespace(current.Namespace)
	obj.SetName(current.Name)
	uid := current.UID
	err = r.Client.Delete(ctx, obj, client.Preconditions{UID: &uid})
	switch {
	case apierrors.IsNotFound(err):
		return report{}, nil
	case err != nil:
		return report{}, fmt.Errorf("deleting %s %s: %w", k.kind, m.Name, err)
	}
	return report{reason: eventDeleted, note: fmt.Sprintf("deleted %s %s (size is %d)", k.kind, m.Name, desired.Replicas(m)), obj: current}, nil
}

// whoChanged names the managers that took fields of current from the
// operator. A summary tells only whether the operator owns exactly the
// fields it is about to apply; when it does not, the object is read from
// the apiserver with every manager's field set: a read only when an apply
// is due anyway, and only when it sets fields the operator does not own, or
// no longer sets some it owns.
func whoChanged[T client.Object, A runtime.ApplyConfiguration](ctx context.Context, r *Reconciler, k ownedKind[T, A], current *owned.Summary, want A) ([]string, error) {
	exactly, err := current.OwnsExactly(want)
	if err != nil || exactly {
		return nil, err
	}
	live := k.newObj()
	err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(current), live)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("getting %s %s: %w", k.kind, current.Name, err)
	}
	return owned.ManagersOfLostFields(live, want)
}

// lookup returns the summary of the object of kind k with the Memcached's
// name, or nil when none exists, from the store, without a request: the
// store holds the operator's objects (labelled), those it created a moment
// ago that its watch has not shown yet, and the names of all others. The
// object is read from the apiserver, whole, only when it is the
// Memcached's but lost the operator's label.
func lookup[T client.Object, A runtime.ApplyConfiguration](ctx context.Context, r *Reconciler, k ownedKind[T, A], m *cachev1alpha1.Memcached) (*owned.Summary, error) {
	key := client.ObjectKeyFromObject(m)
	s, found, err := r.Owned.Get(k.kind, key)
	if err != nil || found {
		return s, err
	}
	if s, found := r.Owned.Unseen(k.kind, key); found {
		return s, nil
	}
	other, found, err := r.Owned.Other(k.kind, key)
	switch {
	case err != nil || !found:
		return nil, err
	case !metav1.IsControlledBy(other, m):
		return &owned.Summary{TypeMeta: metav1.TypeMeta{Kind: string(k.kind)}, ObjectMeta: other.ObjectMeta}, nil
	}
	obj := k.newObj()
	err = r.APIReader.Get(ctx, key, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("getting %s %s: %w", k.kind, key.Name, err)
	}
	return owned.Summarize(obj)
}

// describe says what an apply that changed an object did, for the
// reconcile's event: created, scaled or updated. A drift correction that
// did not scale is told by its own event, so it reports nothing here.
func describe(m *cachev1alpha1.Memcached, kind owned.Kind, before, after *owned.Summary, driftCorrected bool) report {
	if before == nil {
		note := fmt.Sprintf("created %s %s", kind, after.Name)
		if kind == owned.KindDeployment {
			note += fmt.Sprintf(" with %d replicas", desired.Replicas(m))
		}
		return report{reason: eventCreated, note: note, obj: after}
	}
	if kind == owned.KindDeployment && replicas(before) != replicas(after) {
		return report{reason: eventScaled, note: fmt.Sprintf("scaled Deployment %s from %d to %d replicas", after.Name, replicas(before), replicas(after)), obj: after}
	}
	if driftCorrected {
		return report{}
	}
	return report{reason: eventUpdated, note: fmt.Sprintf("updated %s %s", kind, after.Name), obj: after}
}

// eventActions are the events.k8s.io actions of the report reasons.
var eventActions = map[string]string{eventCreated: "Create", eventScaled: "Scale", eventUpdated: "Update", eventDeleted: "Delete"}

// recordReports tells the reports of one reconcile in one event, under the
// reason of the first (the Deployment's, when it changed): each event is a
// write to the apiserver, and creating a Memcached changes two or three
// objects at once.
func recordReports(r *Reconciler, m *cachev1alpha1.Memcached, reports []report) {
	var notes []string
	var first report
	for _, c := range reports {
		if c.reason == "" {
			continue
		}
		if first.reason == "" {
			first = c
		}
		notes = append(notes, c.note)
	}
	if first.reason == "" {
		return
	}
	note := strings.Join(notes, "; ")
	note = strings.ToUpper(note[:1]) + note[1:]
	r.Recorder.Eventf(m, first.obj, corev1.EventTypeNormal, first.reason, eventActions[first.reason], "%s", note)
}

func replicas(d *owned.Summary) int32 {
	if d.Replicas == nil {
		return 1
	}
	return *d.Replicas
}
