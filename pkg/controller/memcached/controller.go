// Package memcached is the Memcached controller: it applies each
// Memcached's Deployment, Service, PodDisruptionBudget, ServiceMonitor and
// status with server-side apply, under the field managers of package owned,
// and sends nothing when nothing changed.
package memcached

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	cacheac "github.com/example/memcached-operator/applyconfig/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/secrets"
	"github.com/example/memcached-operator/pkg/status"
)

// deploymentReportTimeout bounds how long, after the operator changed a
// Deployment, the Memcached's status waits for a report worth writing: the
// Deployment controller's first report on the change, and, while the
// status already lags the Memcached's generation, the rollout's end. Each
// report is a watch event that reconciles the Memcached again at once; this
// is the safety net, and what a slow rollout's status lags by at most.
const deploymentReportTimeout = 30 * time.Second

// replaceRecheckInterval is how often a Memcached whose Deployment is being
// replaced is looked at again, until the replaced Deployment is gone.
const replaceRecheckInterval = time.Second

// errMemcachedGone: the Memcached was deleted after the cache last saw it,
// or its namespace is being deleted.
var errMemcachedGone = errors.New("the Memcached is gone or going")

// Event reasons.
const (
	eventCreated        = "Created"
	eventScaled         = "Scaled"
	eventUpdated        = "Updated"
	eventDriftCorrected = "DriftCorrected"
	eventDeleted        = "Deleted"
	eventApplyRejected  = "ApplyRejected"
	eventRolloutStalled = "RolloutStalled"
)

// Reconciler reconciles Memcached objects.
type Reconciler struct {
	// Client reads Memcacheds from the manager's cache and sends applies.
	Client client.Client
	// APIReader reads from the apiserver what the caches cannot tell: an
	// object of the Memcached's name the store does not hold (not the
	// operator's, or not created yet), whether a Memcached about to get new
	// objects still exists, and every manager's fields when naming who
	// changed one.
	APIReader client.Reader
	// Owned holds summaries of the Deployments, Services,
	// PodDisruptionBudgets and ServiceMonitors the operator made.
	Owned *owned.Store
	// Recorder records events on Memcached objects.
	Recorder events.EventRecorder
	// Images are the images of a Memcached whose spec names none.
	Images desired.Images
	// Secrets follows the Secrets that Memcacheds name in spec.tls and
	// spec.auth.
	Secrets *secrets.Watcher
	// ReplacedManagers are the field managers of the operator this one
	// replaces (the Operator SDK tutorial's binary is "manager"): when the
	// operator replaces a Deployment it did not make, their Update entries
	// in the Memcached's status become the operator's.
	ReplacedManagers []string
	// ServiceMonitors: the cluster serves the Prometheus Operator's
	// ServiceMonitors, so a Memcached with monitoring gets one.
	ServiceMonitors bool
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/status,verbs=get;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=list;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings a Memcached's Deployment, Service, PodDisruptionBudget,
// ServiceMonitor and status to what its spec asks for.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := &cachev1alpha1.Memcached{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		// Deleted: garbage collection removes what it owned.
		if apierrors.IsNotFound(err) {
			r.Secrets.Use(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !m.DeletionTimestamp.IsZero() {
		r.Secrets.Use(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("memcached", klog.KObj(m), "generation", m.Generation)
	ctx = ctrl.LoggerInto(ctx, log)

	mounted, err := r.mountedSecrets(m)
	if errors.Is(err, errSecretsPending) {
		// The Secrets' watches tell when they have listed.
		return reconcile.Result{RequeueAfter: secretsPendingRecheck}, nil
	}
	obs, changed, err := r.reconcileObjects(ctx, m, mounted)
	if errors.Is(err, errMemcachedGone) {
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if wait := statusWait(m, obs, changed, r.now()); wait > 0 {
		// Anything written to the status now would be stale within
		// moments, and say nothing a reader of the status lacks: until
		// then observedGeneration lags, which reads as "in progress".
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if err := r.applyStatus(ctx, m, obs); err != nil {
		return reconcile.Result{}, err
	}
	if obs.Monitor == status.MonitorCRDMissing {
		r.reportMissingCRD(m)
	}
	if obs.Secret != nil {
		r.reportSecretProblem(m, obs.Secret)
	}

	switch {
	case obs.Replacing != "":
		// The replaced Deployment is outside the store: its changes raise
		// no event.
		return reconcile.Result{RequeueAfter: replaceRecheckInterval}, nil
	case obs.ApplyError != nil:
		// Only a spec change can fix it, and a spec change is an event.
		return reconcile.Result{}, reconcile.TerminalError(obs.ApplyError)
	}
	return reconcile.Result{}, nil
}

// reconcileObjects makes m's Deployment, Service, PodDisruptionBudget and
// ServiceMonitor what m asks for, sending an apply only for an object whose owned fields
// differ. It returns what it observed, and whether the Deployment was
// created or changed.
func (r *Reconciler) reconcileObjects(ctx context.Context, m *cachev1alpha1.Memcached, mounted mountedSecrets) (status.Observation, bool, error) {
	obs := status.Observation{Image: r.Images.Image(m), Secret: mounted.problem}
	var reports []report
	s := &scope{r: r, m: m}
	defer func() { recordReports(r, m, reports) }()
	observe := func(kind owned.Kind, out outcome) {
		if out.notOwned {
			obs.NotOwned = append(obs.NotOwned, kind)
		}
		if obs.ApplyError == nil {
			obs.ApplyError = out.refused
		}
		reports = append(reports, out.report)
	}

	current, dep, err := find(ctx, s, deployments)
	switch {
	case err != nil || dep.notOwned:
	case current != nil && !selectsOwnPods(current, m):
		obs.Replacing, err = r.replace(ctx, s, current)
		dep.obj = current
	case mounted.problem != nil:
		// Pods that cannot mount what they need would never start: the
		// Deployment stays as it is, serving, until the Secret is fixed.
		dep.obj = current
	default:
		if current != nil && current.LastApplied() == nil {
			// Adopted in place: the Memcached's status and finalizer
			// are taken over as in a replacement.
			if err = r.adoptFieldManagers(ctx, m); err == nil {
				err = r.adoptDeploymentManagers(ctx, current)
			}
		}
		if err == nil {
			dep, err = update(ctx, s, deployments, current, desired.Deployment(m, r.Images, mounted.digests))
		}
	}
	if err != nil {
		return obs, false, err
	}
	obs.Deployment = dep.obj
	observe(owned.KindDeployment, dep)

	svc, err := ensure(ctx, s, services, desired.Service(m))
	if err != nil {
		return obs, false, err
	}
	obs.Service = svc.obj
	observe(owned.KindService, svc)

	if desired.WantsPodDisruptionBudget(m) {
		pdb, err := ensure(ctx, s, podDisruptionBudgets, desired.PodDisruptionBudget(m))
		if err != nil {
			return obs, false, err
		}
		observe(owned.KindPodDisruptionBudget, pdb)
	} else {
		rep, err := remove(ctx, s, podDisruptionBudgets)
		if err != nil {
			return obs, false, err
		}
		reports = append(reports, rep)
	}

	switch {
	case !r.ServiceMonitors:
		if desired.Monitored(m) {
			obs.Monitor = status.MonitorCRDMissing
		}
	case desired.Monitored(m):
		sm, err := ensure(ctx, s, serviceMonitors, desired.ServiceMonitor(m))
		if err != nil {
			return obs, false, err
		}
		observe(owned.KindServiceMonitor, sm)
		obs.Monitor = status.MonitorReady
		if sm.notOwned {
			obs.Monitor = status.MonitorNotOwned
		}
	default:
		rep, err := remove(ctx, s, serviceMonitors)
		if err != nil {
			return obs, false, err
		}
		reports = append(reports, rep)
	}
	return obs, dep.changed, nil
}

// reportMissingCRD records an event on m when it asks for monitoring in a
// cluster without the ServiceMonitor CRD (the exporter runs, and nothing
// scrapes it yet): once, with the status that first says so, since m holds
// the status from before that write.
func (r *Reconciler) reportMissingCRD(m *cachev1alpha1.Memcached) {
	if c := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionMonitored); c != nil && c.Reason == cachev1alpha1.ReasonServiceMonitorCRDMissing {
		return
	}
	r.Recorder.Eventf(m, nil, corev1.EventTypeWarning, cachev1alpha1.ReasonServiceMonitorCRDMissing, "Monitor", "%s", status.MissingCRDMessage(m))
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// statusWait is how long m's status waits before it is written: while the
// Deployment controller has not reported on the operator's change yet
// (reportPending), or while its reports only tell of a rollout on its way
// (midRollout), for up to deploymentReportTimeout after the change. Every
// status of a rollout that ends within that time is then written once, at
// its end: one status write per change instead of one per report.
func statusWait(m *cachev1alpha1.Memcached, obs status.Observation, justChanged bool, now time.Time) time.Duration {
	if obs.Replacing != "" {
		return 0
	}
	if wait := reportPending(obs.Deployment, justChanged, now); wait > 0 {
		return wait
	}
	if midRollout(m, obs) {
		return sinceChange(obs.Deployment, justChanged, now)
	}
	return 0
}

// midRollout tells whether the status obs gives m would only say that the
// Deployment is rolling out as asked: nothing wrong, the cache still
// serving if it served, and m's status already lags its generation, so
// that kstatus, Argo CD's health check and kubectl wait read m as in
// progress whatever the conditions say (a Memcached nothing has written a
// status for has observedGeneration 0). A scale-up's moment below the
// Deployment's minimum availability, with pods serving, is such a status.
// A rollout the Memcached's generation did not start (a Secret rotated) is
// written as it goes: its status would otherwise read as current.
func midRollout(m *cachev1alpha1.Memcached, obs status.Observation) bool {
	if m.Status.ObservedGeneration >= m.Generation || !status.RollingOut(m, obs) {
		return false
	}
	was := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionAvailable)
	served := was != nil && was.Status == metav1.ConditionTrue
	serves := obs.Deployment.Status.AvailableReplicas > 0 || status.Available(m, obs).Status == metav1.ConditionTrue
	return !served || serves
}

// reportPending is how long the Deployment controller may still take to
// report on d: d has a generation it has not observed, and the operator
// changed it less than deploymentReportTimeout ago (sinceChange). Zero when
// the report is in, or overdue: a status is then written without it.
func reportPending(d *owned.Summary, justChanged bool, now time.Time) time.Duration {
	if d == nil || d.Status.ObservedGeneration >= d.Generation {
		return 0
	}
	return sinceChange(d, justChanged, now)
}

// sinceChange is what is left of deploymentReportTimeout since the
// operator changed d: in this reconcile (justChanged), or by the time the
// apiserver recorded on the operator's managed-fields entry (a later
// reconcile, such as the one the cache seeing the applied Deployment
// starts). Zero when d was not changed by the operator's apply.
func sinceChange(d *owned.Summary, justChanged bool, now time.Time) time.Duration {
	if d == nil {
		return 0
	}
	if justChanged {
		// The apply's answer carries no managed fields to read the time from.
		return deploymentReportTimeout
	}
	if t := d.LastApplied(); t != nil {
		if left := t.Add(deploymentReportTimeout).Sub(now); left > 0 {
			// Capped: the apiserver's clock may run ahead of ours.
			return min(left, deploymentReportTimeout)
		}
	}
	return 0
}

// applyStatus applies the status computed from obs, unless the status
// fields the operator owns already hold exactly that.
func (r *Reconciler) applyStatus(ctx context.Context, m *cachev1alpha1.Memcached, obs status.Observation) error {
	want := cacheac.Memcached(m.Name, m.Namespace).
		WithStatus(status.Status(m, obs, metav1.NewTime(r.now()).Rfc3339Copy()))

	same, err := owned.StatusAppliesNothing(m, want)
	if err != nil {
		return err
	}
	if same {
		appliesSkipped.WithLabelValues(kindMemcachedStatus).Inc()
		return nil
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Applying status")
	err = r.Client.Status().Apply(ctx, want, client.FieldOwner(owned.StatusFieldManager), client.ForceOwnership)
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

// enqueueController reconciles the Memcached that controls an object, as
// the builder's Owns does, but from the controller reference alone: a
// Memcached is namespaced, so it shares its objects' namespace, and no
// RESTMapper lookup is needed. Owns makes one per event, and each of those
// allocates an error for every API group version the mapper does not find
// the kind in.
var enqueueController = handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != cachev1alpha1.Kind {
		return nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != cachev1alpha1.SchemeGroupVersion.Group {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}}}
})

// SetupWithManager registers the controller with mgr, watching sources
// too. r.Owned and r.Secrets must be added to mgr too (see Setup).
// enqueueFreedName reconciles the Memcached of an object's name when that
// object, not the operator's, is deleted: a Memcached that the object kept
// from making its own gets it now.
var enqueueFreedName = handler.Funcs{
	DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: e.Object.GetName()}})
	},
}

func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options, sources ...source.Source) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&cachev1alpha1.Memcached{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(opts)
	srcs := append(r.Owned.Sources(enqueueController), r.Owned.OtherSources(enqueueFreedName)...)
	for _, src := range append(srcs, sources...) {
		b = b.WatchesRawSource(src)
	}
	return b.Complete(r)
}
