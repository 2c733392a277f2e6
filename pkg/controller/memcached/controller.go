// Package memcached is the Memcached controller: it applies each
// Memcached's StatefulSet, Service, PodDisruptionBudget, NetworkPolicy,
// ServiceMonitor and status with server-side apply, under the field
// managers of package owned, and sends nothing when nothing changed.
//
// A reconcile reads in this order: Reconcile (this file) gets the
// Memcached and runs its phases (phases.go), one per object, each of them
// whatever the others returned: the StatefulSet (statefulset.go: the
// Secrets gate, the replacement of a Deployment, the apply), the rollout
// of its pods where the operator rolls them (rollout.go), the Service, the budget, the
// NetworkPolicy and the ServiceMonitor, each applied or removed through
// objects.go; then the status (scope.go), whose content and timing package
// status decides.
package memcached

import (
	"context"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
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
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/secrets"
)

// Reconciler reconciles Memcached objects.
type Reconciler struct {
	// Client reads Memcacheds from the manager's cache and sends applies.
	Client client.Client
	// APIReader reads from the apiserver what the caches cannot tell: an
	// object of the Memcached's name the store does not hold (not the
	// operator's, or not created yet), and every manager's fields when
	// naming who changed one.
	APIReader client.Reader
	// Owned holds summaries of the StatefulSets, Deployments, Services,
	// PodDisruptionBudgets, NetworkPolicies and ServiceMonitors the
	// operator made.
	Owned *owned.Store
	// Schemas type the owned kinds for the rule that tells whether an
	// apply is needed; they say whether the cluster serves ServiceMonitors,
	// so that a Memcached with monitoring gets one.
	Schemas *owned.Schemas
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
	// TakeOver: a Deployment the Memcached controls that the operator did
	// not make (the tutorial's) is replaced, and the replaced operator's
	// field managers and finalizer are removed from the Memcached. This
	// needs more permissions than the operator's own (manifests/takeover):
	// patching Memcacheds. Off: such a Deployment is left as it is, and the
	// status says why.
	TakeOver bool
	// Logs reads the start of a memcached container's log, where the warm
	// runner says what memcached restored: the operator confirms each
	// restart in place by it before the next slot's.
	Logs PodLogs
	// Autoscaler decides the size of the Memcacheds with spec.autoscaling;
	// the status tells its decisions. Nil: none is autoscaled.
	Autoscaler *Autoscaler
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	// toldPodProblems holds, by Memcached, the reason of the pod problem
	// its last event told: one event per cause.
	toldPodProblems sync.Map
	// sentStatus holds, by Memcached, the last status written (sentStatus).
	sentStatus sync.Map
	// publishedSeals holds, by Memcached, the membership and move the
	// operator last published (publishedSeal): with what its pods carry,
	// what vouches for the membership ConfigMap's content (scope.told).
	publishedSeals sync.Map
	// toldKeysLost holds the slots' new addresses whose lost keys an
	// event told (keysLostKey).
	toldKeysLost sync.Map
}

// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs=get;list;watch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/scale,verbs=patch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=pods/resize,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=list

// Reconcile brings a Memcached's StatefulSet, Service, PodDisruptionBudget,
// NetworkPolicy, ServiceMonitor and status to what its spec asks for.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := &cachev1alpha1.Memcached{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		// Deleted: garbage collection removes what it owned.
		if apierrors.IsNotFound(err) {
			r.Secrets.Forget(req.NamespacedName)
			r.toldPodProblems.Delete(req.NamespacedName)
			r.sentStatus.Delete(req.NamespacedName)
			r.publishedSeals.Delete(req.NamespacedName)
			forgetMetrics(req.NamespacedName)
			r.forgetKeysLost(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !m.DeletionTimestamp.IsZero() {
		r.Secrets.Forget(req.NamespacedName)
		forgetMetrics(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	// controller-runtime's logger already names the Memcached.
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("generation", m.Generation))

	return newScope(r, m).reconcile(ctx)
}

// SetupWithManager registers the controller with mgr, watching sources
// too. r.Owned and r.Secrets must be added to mgr too (see Setup).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options, sources ...source.Source) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&cachev1alpha1.Memcached{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(opts)
	srcs := append(r.Owned.Sources(enqueueController), r.Owned.OtherSources(enqueueFreedName)...)
	srcs = append(srcs, r.Owned.PodSources(enqueueMemcachedOfPod)...)
	for _, src := range append(srcs, sources...) {
		b = b.WatchesRawSource(src)
	}
	return b.Complete(r)
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

// enqueueFreedName reconciles the Memcached of an object's name when that
// object, not the operator's, is deleted: a Memcached that the object kept
// from making its own gets it now.
var enqueueFreedName = handler.Funcs{
	DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: e.Object.GetName()}})
		// A membership ConfigMap's name is its Memcached's and a suffix.
		if name, ok := strings.CutSuffix(e.Object.GetName(), desired.MembershipSuffix); ok {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: name}})
		}
	},
}

// enqueueMemcachedOfPod reconciles the Memcached of a pod when what the
// pod says of why it is not ready changes: a pod that starts as it should
// says nothing, and its many status changes reconcile nothing.
var enqueueMemcachedOfPod = handler.Funcs{
	CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if p, ok := e.Object.(*owned.Pod); ok && p.Troubled() {
			enqueuePod(p, q)
		}
	},
	UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		old, okOld := e.ObjectOld.(*owned.Pod)
		now, okNew := e.ObjectNew.(*owned.Pod)
		if okOld && okNew && !owned.SamePod(old, now) {
			enqueuePod(now, q)
		}
	},
	DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if p, ok := e.Object.(*owned.Pod); ok && p.Troubled() {
			enqueuePod(p, q)
		}
	},
}

func enqueuePod(p *owned.Pod, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if p.StatefulSet != "" {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.StatefulSet}})
	}
}
