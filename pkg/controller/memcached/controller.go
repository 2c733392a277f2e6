// Package memcached is the Memcached controller: it applies each Memcached's
// Deployment and status with server-side apply, under the field managers
// below, and sends nothing when nothing changed.
package memcached

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	cacheac "github.com/example/memcached-operator/applyconfig/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/status"
)

// Field managers of the operator. They are part of its API: the apiserver
// records which fields each one owns, and renaming one would orphan those
// fields on every object.
const (
	// FieldManager owns the fields the operator sets on the objects it
	// creates for a Memcached (its Deployment).
	FieldManager = "memcached-operator"
	// StatusFieldManager owns the fields the operator sets in a Memcached's
	// status: its conditions, observedGeneration, replicas, readyReplicas
	// and selector.
	StatusFieldManager = "memcached-operator-status"
)

// deploymentReportTimeout bounds the wait for the Deployment controller to
// report on a Deployment the operator just changed. Its report is a watch
// event that reconciles the Memcached again at once; this is the safety net.
const deploymentReportTimeout = 30 * time.Second

// foreignRecheckInterval is how often a Memcached blocked by a Deployment it
// does not own is looked at again; such a Deployment is outside the cache, so
// its removal raises no event.
const foreignRecheckInterval = 30 * time.Second

// errMemcachedGone: the Memcached was deleted after the cache last saw it,
// or its namespace is being deleted.
var errMemcachedGone = errors.New("the Memcached is gone or going")

// Event reasons.
const (
	eventCreated        = "Created"
	eventScaled         = "Scaled"
	eventUpdated        = "Updated"
	eventDriftCorrected = "DriftCorrected"
	eventNotOwned       = "DeploymentNotOwned"
	eventApplyRejected  = "ApplyRejected"
	eventRolloutStalled = "RolloutStalled"
)

// Reconciler reconciles Memcached objects.
type Reconciler struct {
	// Client reads from the cache and sends applies.
	Client client.Client
	// APIReader reads from the apiserver: used only to look for a
	// Deployment the cache does not hold (not created by the operator).
	APIReader client.Reader
	// Recorder records events on Memcached objects.
	Recorder events.EventRecorder
	// DefaultImage is the memcached image of a Memcached without spec.image.
	DefaultImage string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs=get;list;watch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/status,verbs=get;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings a Memcached's Deployment and status to what its spec asks for.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := &cachev1alpha1.Memcached{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		// Deleted: garbage collection removes what it owned.
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !m.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("memcached", klog.KObj(m), "generation", m.Generation)
	ctx = ctrl.LoggerInto(ctx, log)

	obs, changed, err := r.reconcileDeployment(ctx, m)
	if errors.Is(err, errMemcachedGone) {
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if changed {
		// Anything written to the status now would be stale within
		// milliseconds: the Deployment controller is about to report on the
		// change, and that report reconciles this Memcached again. Until
		// then observedGeneration lags, which reads as "in progress".
		return reconcile.Result{RequeueAfter: deploymentReportTimeout}, nil
	}
	if err := r.applyStatus(ctx, m, obs); err != nil {
		return reconcile.Result{}, err
	}

	switch {
	case obs.Foreign:
		return reconcile.Result{RequeueAfter: foreignRecheckInterval}, nil
	case obs.ApplyError != nil:
		// Only a spec change can fix it, and a spec change is an event.
		return reconcile.Result{}, reconcile.TerminalError(obs.ApplyError)
	}
	return reconcile.Result{}, nil
}

// reconcileDeployment applies m's Deployment when what the operator owns of
// it differs from what m asks for. It returns what it observed, and whether
// the apply created or changed the Deployment.
func (r *Reconciler) reconcileDeployment(ctx context.Context, m *cachev1alpha1.Memcached) (status.Observation, bool, error) {
	log := ctrl.LoggerFrom(ctx)
	want := desired.Deployment(m, r.DefaultImage)

	current, err := r.getDeployment(ctx, client.ObjectKeyFromObject(m))
	if err != nil {
		return status.Observation{}, false, err
	}
	if current != nil && !metav1.IsControlledBy(current, m) {
		log.Info("Leaving alone a Deployment not controlled by the Memcached", "deployment", klog.KObj(current))
		foreignObjectsRefused.WithLabelValues(kindDeployment).Inc()
		r.Recorder.Eventf(m, current, corev1.EventTypeWarning, eventNotOwned, "Refuse",
			"Deployment %s exists and is not controlled by this Memcached; leaving it alone", current.Name)
		return status.Observation{Foreign: true}, false, nil
	}

	if current == nil {
		// Creating: make sure the Memcached still exists. When it was just
		// deleted, the cache may still hold it while garbage collection has
		// already removed its Deployment, and an apply would create an
		// orphan. This read happens once per Deployment created.
		live := &cachev1alpha1.Memcached{}
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(m), live)
		if apierrors.IsNotFound(err) || (err == nil && live.UID != m.UID) {
			log.V(1).Info("Not creating Deployment: the Memcached is gone")
			return status.Observation{}, false, errMemcachedGone
		}
		if err != nil {
			return status.Observation{}, false, fmt.Errorf("getting Memcached %s: %w", m.Name, err)
		}
	}

	var lostTo []string
	if current != nil {
		same, err := ownedEqual(current, want)
		if err != nil {
			return status.Observation{}, false, err
		}
		if same {
			appliesSkipped.WithLabelValues(kindDeployment).Inc()
			return status.Observation{Deployment: current}, false, nil
		}
		if lostTo, err = managersOfLostFields(current, want); err != nil {
			return status.Observation{}, false, err
		}
	}

	log.Info("Applying Deployment", "deployment", klog.KRef(m.Namespace, m.Name))
	err = r.Client.Apply(ctx, want, client.FieldOwner(FieldManager), client.ForceOwnership)
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace is going away, and the Memcached with it: nothing
		// to create, and no status worth writing.
		log.V(1).Info("Not applying Deployment: the namespace is terminating")
		return status.Observation{}, false, errMemcachedGone
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		log.Error(err, "The apiserver refused the Deployment")
		r.Recorder.Eventf(m, nil, corev1.EventTypeWarning, eventApplyRejected, "Apply",
			"The apiserver refused Deployment %s: %v", m.Name, err)
		return status.Observation{ApplyError: err}, false, nil
	case err != nil:
		return status.Observation{}, false, fmt.Errorf("applying Deployment %s: %w", m.Name, err)
	}
	appliesSent.WithLabelValues(kindDeployment).Inc()

	// Apply wrote the apiserver's answer into want.
	applied, err := toDeployment(want)
	if err != nil {
		return status.Observation{}, false, err
	}
	changed := current == nil || applied.ResourceVersion != current.ResourceVersion
	if changed {
		r.recordDeploymentEvents(m, current, applied, lostTo)
	}
	return status.Observation{Deployment: applied}, changed, nil
}

func (r *Reconciler) recordDeploymentEvents(m *cachev1alpha1.Memcached, before, after *appsv1.Deployment, lostTo []string) {
	switch {
	case before == nil:
		r.Recorder.Eventf(m, after, corev1.EventTypeNormal, eventCreated, "Create",
			"Created Deployment %s with %d replicas", after.Name, desired.Replicas(m))
		return
	case len(lostTo) > 0:
		driftCorrected.WithLabelValues(kindDeployment).Inc()
		r.Recorder.Eventf(m, after, corev1.EventTypeNormal, eventDriftCorrected, "CorrectDrift",
			"Restored fields of Deployment %s changed by %v", after.Name, lostTo)
	}
	oldReplicas, newReplicas := replicas(before), replicas(after)
	if oldReplicas != newReplicas {
		r.Recorder.Eventf(m, after, corev1.EventTypeNormal, eventScaled, "Scale",
			"Scaled Deployment %s from %d to %d replicas", after.Name, oldReplicas, newReplicas)
	} else if len(lostTo) == 0 {
		r.Recorder.Eventf(m, after, corev1.EventTypeNormal, eventUpdated, "Update",
			"Updated Deployment %s", after.Name)
	}
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// getDeployment returns the Deployment of that name, or nil when there is
// none. The cache holds only Deployments labelled as the operator's; one
// without that label (foreign, or ours with the label removed) is looked up
// on the apiserver, which costs a read only while the Deployment is missing.
func (r *Reconciler) getDeployment(ctx context.Context, key client.ObjectKey) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	err := r.Client.Get(ctx, key, d)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, d)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("getting Deployment %s: %w", key.Name, err)
	}
	return d, nil
}

// applyStatus applies the status computed from obs, unless the status
// fields the operator owns already hold exactly that.
func (r *Reconciler) applyStatus(ctx context.Context, m *cachev1alpha1.Memcached, obs status.Observation) error {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	want := cacheac.Memcached(m.Name, m.Namespace).
		WithStatus(status.Status(m, obs, metav1.NewTime(now()).Rfc3339Copy()))

	owned, err := cacheac.ExtractMemcachedStatus(m, StatusFieldManager)
	if err != nil {
		return fmt.Errorf("extracting status of Memcached %s: %w", m.Name, err)
	}
	same, err := jsonEqual(owned, want)
	if err != nil {
		return err
	}
	if same {
		appliesSkipped.WithLabelValues(kindMemcachedStatus).Inc()
		return nil
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Applying status")
	err = r.Client.Status().Apply(ctx, want, client.FieldOwner(StatusFieldManager), client.ForceOwnership)
	if apierrors.IsNotFound(err) {
		// Deleted since the cache saw it: nothing to report to.
		ctrl.LoggerFrom(ctx).V(1).Info("Not applying status: the Memcached is gone")
		return nil
	}
	if err != nil {
		return fmt.Errorf("applying status of Memcached %s: %w", m.Name, err)
	}
	appliesSent.WithLabelValues(kindMemcachedStatus).Inc()
	if obs.Deployment != nil {
		if c := status.Stalled(m, obs); c.Status == metav1.ConditionTrue && c.Reason == cachev1alpha1.ReasonRolloutStalled {
			r.Recorder.Eventf(m, obs.Deployment, corev1.EventTypeWarning, eventRolloutStalled, "Rollout", "%s", c.Message)
		}
	}
	return nil
}

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&cachev1alpha1.Memcached{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&appsv1.Deployment{}).
		WithOptions(opts).
		Complete(r)
}
