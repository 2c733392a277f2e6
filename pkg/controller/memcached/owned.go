package memcached

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

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
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/status"
)

// ownedKind is a kind of object the operator makes for a Memcached, named
// after it and controlled by it: how to allocate one, and how to extract
// the fields FieldManager owns of one as an apply configuration.
type ownedKind[T client.Object, A runtime.ApplyConfiguration] struct {
	name    string
	newObj  func() T
	extract func(T, string) (A, error)
}

var (
	deployments = ownedKind[*appsv1.Deployment, *appsv1ac.DeploymentApplyConfiguration]{
		name:    status.KindDeployment,
		newObj:  func() *appsv1.Deployment { return &appsv1.Deployment{} },
		extract: appsv1ac.ExtractDeployment,
	}
	services = ownedKind[*corev1.Service, *corev1ac.ServiceApplyConfiguration]{
		name:    status.KindService,
		newObj:  func() *corev1.Service { return &corev1.Service{} },
		extract: corev1ac.ExtractService,
	}
	podDisruptionBudgets = ownedKind[*policyv1.PodDisruptionBudget, *policyv1ac.PodDisruptionBudgetApplyConfiguration]{
		name:    status.KindPodDisruptionBudget,
		newObj:  func() *policyv1.PodDisruptionBudget { return &policyv1.PodDisruptionBudget{} },
		extract: policyv1ac.ExtractPodDisruptionBudget,
	}
)

// outcome is what ensure did with one object.
type outcome[T client.Object] struct {
	// obj is the object as the apiserver holds it after ensure, when it
	// exists and is the Memcached's.
	obj    T
	exists bool
	// changed: the apply created or changed the object.
	changed bool
	// notOwned: an object of that name exists that the Memcached does not
	// control; it was left alone.
	notOwned bool
	// refused is the apiserver's refusal of the apply, naming the object.
	refused error
	// change says what the apply changed, for the Memcached's events;
	// empty when it changed nothing.
	change change
}

// change is one object created, scaled, updated or deleted by a reconcile.
type change struct {
	reason string // an event reason: eventCreated, eventScaled, ...
	note   string // lower-case, to be joined with others
	obj    client.Object
}

// creation guards the creation of objects for a Memcached that may just
// have been deleted: the cache can still hold it while garbage collection
// has already removed what it owned, and an apply would then create an
// orphan. It reads the Memcached from the apiserver once per reconcile that
// creates something.
type creation struct {
	r       *Reconciler
	m       *cachev1alpha1.Memcached
	checked bool
}

func (c *creation) allowed(ctx context.Context) error {
	if c.checked {
		return nil
	}
	live := &cachev1alpha1.Memcached{}
	err := c.r.APIReader.Get(ctx, client.ObjectKeyFromObject(c.m), live)
	if apierrors.IsNotFound(err) || (err == nil && live.UID != c.m.UID) {
		ctrl.LoggerFrom(ctx).V(1).Info("Not creating objects: the Memcached is gone")
		return errMemcachedGone
	}
	if err != nil {
		return fmt.Errorf("getting Memcached %s: %w", c.m.Name, err)
	}
	c.checked = true
	return nil
}

// ensure applies want, the object of kind k that m should have, when what
// FieldManager owns of the current object differs from it, and does nothing
// to an object of that name that m does not control. It records events on
// m for what it changed.
func ensure[T client.Object, A runtime.ApplyConfiguration](ctx context.Context, c *creation, k ownedKind[T, A], want A) (outcome[T], error) {
	r, m := c.r, c.m
	log := ctrl.LoggerFrom(ctx)
	var out outcome[T]

	current, found, err := get(ctx, r, k, client.ObjectKeyFromObject(m))
	if err != nil {
		return out, err
	}
	if found && !metav1.IsControlledBy(current, m) {
		log.Info("Leaving alone an object not controlled by the Memcached", "kind", k.name, "object", klog.KObj(current))
		foreignObjectsRefused.WithLabelValues(k.name).Inc()
		r.Recorder.Eventf(m, current, corev1.EventTypeWarning, k.name+"NotOwned", "Refuse",
			"%s %s exists and is not controlled by this Memcached; leaving it alone", k.name, current.GetName())
		out.notOwned = true
		return out, nil
	}

	var lostTo []string
	if found {
		same, err := appliesNothing(current, want)
		if err != nil {
			return out, err
		}
		if same {
			appliesSkipped.WithLabelValues(k.name).Inc()
			out.obj, out.exists = current, true
			return out, nil
		}
		if lostTo, err = whoChanged(ctx, r, k, current, want); err != nil {
			return out, err
		}
	} else if err := c.allowed(ctx); err != nil {
		return out, err
	}

	log.Info("Applying object", "kind", k.name, "object", klog.KObj(m))
	err = r.Client.Apply(ctx, want, client.FieldOwner(FieldManager), client.ForceOwnership)
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace is going away, and the Memcached with it: nothing
		// to create, and no status worth writing.
		log.V(1).Info("Not applying: the namespace is terminating", "kind", k.name)
		return out, errMemcachedGone
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		log.Error(err, "The apiserver refused the object", "kind", k.name)
		r.Recorder.Eventf(m, nil, corev1.EventTypeWarning, eventApplyRejected, "Apply",
			"The apiserver refused %s %s: %v", k.name, m.Name, err)
		out.refused = fmt.Errorf("%s %s: %w", k.name, m.Name, err)
		return out, nil
	case err != nil:
		return out, fmt.Errorf("applying %s %s: %w", k.name, m.Name, err)
	}
	appliesSent.WithLabelValues(k.name).Inc()

	// Apply wrote the apiserver's answer into want.
	applied := k.newObj()
	if err := convert(want, applied); err != nil {
		return out, err
	}
	out.obj, out.exists = applied, true
	out.changed = !found || applied.GetResourceVersion() != current.GetResourceVersion()
	if out.changed {
		out.change = describe(r, m, k.name, current, found, applied, lostTo)
	}
	return out, nil
}

// remove deletes m's object of kind k when it exists and m controls it; an
// object of that name that m does not control is not its business. It
// looks in the cache only, so that a Memcached at rest costs no request.
func remove[T client.Object, A runtime.ApplyConfiguration](ctx context.Context, c *creation, k ownedKind[T, A]) (change, error) {
	r, m := c.r, c.m
	current := k.newObj()
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(m), current)
	switch {
	case apierrors.IsNotFound(err):
		return change{}, nil
	case err != nil:
		return change{}, fmt.Errorf("getting %s %s: %w", k.name, m.Name, err)
	case !metav1.IsControlledBy(current, m):
		return change{}, nil
	}
	ctrl.LoggerFrom(ctx).Info("Deleting object", "kind", k.name, "object", klog.KObj(current))
	uid := current.GetUID()
	err = r.Client.Delete(ctx, current, client.Preconditions{UID: &uid})
	switch {
	case apierrors.IsNotFound(err):
		return change{}, nil
	case err != nil:
		return change{}, fmt.Errorf("deleting %s %s: %w", k.name, m.Name, err)
	}
	return change{reason: eventDeleted, note: fmt.Sprintf("deleted %s %s (size is %d)", k.name, m.Name, desired.Replicas(m)), obj: current}, nil
}

// whoChanged names the managers that took fields of current from the
// operator. A summary tells only whether the operator owns exactly the
// fields it is about to apply; when it does not, the object is read from
// the apiserver with every manager's field set: a read only when an apply
// is due anyway, and only when it sets fields the operator does not own, or
// no longer sets some it owns.
func whoChanged[T client.Object, A runtime.ApplyConfiguration](ctx context.Context, r *Reconciler, k ownedKind[T, A], current T, want A) ([]string, error) {
	exactly, err := ownsExactly(current, want)
	if err != nil || exactly {
		return nil, err
	}
	live := k.newObj()
	err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(current), live)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("getting %s %s: %w", k.name, current.GetName(), err)
	}
	return managersOfLostFields(live, want)
}

// get returns the summary (see summarize) of the object of kind k with that
// key. The cache holds only objects labelled as the operator's; one without
// that label (foreign, or ours with the label removed) is looked up on the
// apiserver, which costs a read only while the object is missing from the
// cache.
func get[T client.Object, A runtime.ApplyConfiguration](ctx context.Context, r *Reconciler, k ownedKind[T, A], key client.ObjectKey) (T, bool, error) {
	obj := k.newObj()
	err := r.Client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		if err = r.APIReader.Get(ctx, key, obj); err == nil {
			s, serr := summarize(obj)
			if serr != nil {
				return obj, false, serr
			}
			obj = s.(T)
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		return obj, false, nil
	case err != nil:
		return obj, false, fmt.Errorf("getting %s %s: %w", k.name, key.Name, err)
	}
	return obj, true, nil
}

// describe says what an apply changed. Drift corrections get their own
// event at once, naming who changed the fields; the rest is returned, to be
// told in one event with the reconcile's other changes.
func describe(r *Reconciler, m *cachev1alpha1.Memcached, kind string, before client.Object, existed bool, after client.Object, lostTo []string) change {
	if !existed {
		note := fmt.Sprintf("created %s %s", kind, after.GetName())
		if _, ok := after.(*appsv1.Deployment); ok {
			note += fmt.Sprintf(" with %d replicas", desired.Replicas(m))
		}
		return change{reason: eventCreated, note: note, obj: after}
	}
	if len(lostTo) > 0 {
		driftCorrected.WithLabelValues(kind).Inc()
		r.Recorder.Eventf(m, after, corev1.EventTypeNormal, eventDriftCorrected, "CorrectDrift",
			"Restored fields of %s %s changed by %v", kind, after.GetName(), lostTo)
	}
	oldDep, isDep := before.(*appsv1.Deployment)
	if newDep, _ := after.(*appsv1.Deployment); isDep && replicas(oldDep) != replicas(newDep) {
		return change{reason: eventScaled, note: fmt.Sprintf("scaled Deployment %s from %d to %d replicas", after.GetName(), replicas(oldDep), replicas(newDep)), obj: after}
	}
	if len(lostTo) > 0 {
		return change{}
	}
	return change{reason: eventUpdated, note: fmt.Sprintf("updated %s %s", kind, after.GetName()), obj: after}
}

// eventActions are the events.k8s.io actions of the change reasons.
var eventActions = map[string]string{eventCreated: "Create", eventScaled: "Scale", eventUpdated: "Update", eventDeleted: "Delete"}

// recordChanges tells the changes of one reconcile in one event, under the
// reason of the first (the Deployment's, when it changed): each event is a
// write to the apiserver, and creating a Memcached changes two or three
// objects at once.
func recordChanges(r *Reconciler, m *cachev1alpha1.Memcached, changes []change) {
	var notes []string
	var first change
	for _, c := range changes {
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

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// convert decodes the apiserver's answer to an apply into a typed object.
func convert(ac runtime.ApplyConfiguration, into client.Object) error {
	raw, err := json.Marshal(ac)
	if err != nil {
		return fmt.Errorf("encoding %T: %w", ac, err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("decoding %T: %w", into, err)
	}
	return nil
}
