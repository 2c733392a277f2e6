package owned

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1client "github.com/prometheus-operator/prometheus-operator/pkg/client/versioned/typed/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	networkingv1client "k8s.io/client-go/kubernetes/typed/networking/v1"
	policyv1client "k8s.io/client-go/kubernetes/typed/policy/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/pkg/reconnect"
)

// Store watches the StatefulSets, Deployments, Services, PodDisruptionBudgets,
// NetworkPolicies and ServiceMonitors that carry the operator's label, in
// the namespaces it watches, and keeps a Summary of each. It is not the
// manager's cache: that cache would hand out summaries as if they were
// whole objects. Add it to the manager as a
// Runnable; it runs on every replica, leader or not, so that a new leader
// starts with it filled.
//
// Of the objects of those kinds that do not carry the label, it keeps the
// names (and UIDs and owner references) only: so that the controller knows
// without a request whether a name it is about to use is taken.
type Store struct {
	resync time.Duration
	// informers of each kind, by namespace ("" when watching all).
	informers map[Kind]map[string]toolscache.SharedIndexInformer
	// others are the metadata informers of the objects without the label.
	others map[Kind]map[string]toolscache.SharedIndexInformer
	// applied are the objects the controller created or changed that the
	// informers may not have shown yet.
	appliedMu sync.Mutex
	applied   map[appliedKey]applied
	// kept holds, by object, what RememberNotKept learned: the digest the
	// apiserver records for an apply of the operator, and the apply's own.
	keptMu sync.Mutex
	kept   map[types.UID]keptAs
}

// NewStore returns a Store of the objects labelled with selector in
// namespaces (all namespaces when empty), watched with the configuration
// and HTTP client of a manager, and summarized with schemas. Every resync,
// its informers hand each object to their handlers again (0: never), as the
// manager's cache does with its SyncPeriod: the controller's periodic look
// at every Memcached. It uses the typed clients of the owned kinds only:
// client-go's informer factory would link every API group's informers into
// the binary (docs/benchmarks.md has what that cost).
//
// When schemas know ServiceMonitors, it watches the Prometheus Operator's
// ServiceMonitors too: only in a cluster that serves them (see
// LearnSchemas).
//
// others selects the objects that do not carry the operator's label (the
// complement of selector): the store keeps their metadata, trimmed to
// names, UIDs and controller references (see Other).
func NewStore(cfg *rest.Config, hc *http.Client, namespaces []string, selector, others labels.Selector, resync time.Duration, schemas *Schemas) (*Store, error) {
	kinds, core, meta, err := watchedKinds(cfg, hc, schemas)
	if err != nil {
		return nil, err
	}
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	s := &Store{
		resync:    resync,
		informers: map[Kind]map[string]toolscache.SharedIndexInformer{},
		others:    map[Kind]map[string]toolscache.SharedIndexInformer{},
		applied:   map[appliedKey]applied{},
		kept:      map[types.UID]keptAs{},
	}
	summarize := func(obj any) (any, error) {
		o, ok := obj.(client.Object)
		if !ok {
			return obj, nil // a tombstone: its object was summarized before
		}
		return Summarize(o, schemas)
	}
	for _, ns := range namespaces {
		for _, k := range kinds {
			lw := toolscache.NewFilteredListWatchFromClient(k.client, k.gvr.Resource, ns, withSelector(selector))
			inf := newInformer(lw, k.example, fmt.Sprintf("%s summaries", k.kind), s.resync, summarize)
			if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
				AddFunc:    s.seen,
				UpdateFunc: func(_, obj any) { s.seen(obj) },
				DeleteFunc: s.gone,
			}); err != nil {
				return nil, err
			}
			s.add(s.informers, k.kind, ns, inf)
			others := reconnect.NewSharedIndexInformer(metadataListWatch(meta, k.gvr, ns, withSelector(others)), &metav1.PartialObjectMetadata{}, 0, toolscache.Indexers{})
			// Before the informer starts, so it holds nothing but names.
			_ = others.SetTransform(trimOther)
			s.add(s.others, k.kind, ns, others)
		}
		s.add(s.informers, kindPod, ns, newPodInformer(core, ns, selector))
	}
	return s, nil
}

// watchedKind is a kind the store watches: its REST client and resource,
// and the type its watch decodes into.
type watchedKind struct {
	kind    Kind
	client  rest.Interface
	gvr     schema.GroupVersionResource
	example runtime.Object
}

// watchedKinds are the owned kinds the store watches (ServiceMonitors when
// schemas know them), with the REST client of pods and the metadata
// client of the others' names.
func watchedKinds(cfg *rest.Config, hc *http.Client, schemas *Schemas) ([]watchedKind, rest.Interface, metadata.Interface, error) {
	apps, err := appsv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, nil, err
	}
	core, err := corev1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, nil, err
	}
	policy, err := policyv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, nil, err
	}
	networking, err := networkingv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, nil, err
	}
	monitoring, err := monitoringv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, nil, err
	}
	meta, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, nil, err
	}
	clients := map[schema.GroupVersion]rest.Interface{
		appsv1.SchemeGroupVersion:       apps.RESTClient(),
		corev1.SchemeGroupVersion:       core.RESTClient(),
		policyv1.SchemeGroupVersion:     policy.RESTClient(),
		networkingv1.SchemeGroupVersion: networking.RESTClient(),
		monitoringv1.SchemeGroupVersion: monitoring.RESTClient(),
	}
	var kinds []watchedKind
	for _, d := range Kinds {
		if !schemas.Serves(d) {
			continue
		}
		c, ok := clients[d.Resource.GroupVersion()]
		if !ok {
			return nil, nil, nil, fmt.Errorf("no client of %s for %s", d.Resource.GroupVersion(), d.Kind)
		}
		kinds = append(kinds, watchedKind{d.Kind, c, d.Resource, d.New()})
	}
	return kinds, core.RESTClient(), meta, nil
}

// withSelector sets a list or watch's label selector to sel.
func withSelector(sel labels.Selector) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) { o.LabelSelector = sel.String() }
}

// metadataListWatch lists and watches the metadata of gvr's objects in
// namespace, as client-go's metadata informers do.
func metadataListWatch(meta metadata.Interface, gvr schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions)) toolscache.ListerWatcher {
	objects := meta.Resource(gvr).Namespace(namespace)
	return toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return objects.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return objects.Watch(ctx, o)
		},
	}, meta)
}

// newInformer is an informer of lw's objects, each replaced by what
// transform makes of it before the informer holds it. It resumes within
// seconds of an outage of the apiserver (package reconnect).
func newInformer(lw toolscache.ListerWatcher, example runtime.Object, description string, resync time.Duration, transform toolscache.TransformFunc) toolscache.SharedIndexInformer {
	inf := toolscache.NewSharedIndexInformerWithOptions(reconnect.ListWatch(lw), example, toolscache.SharedIndexInformerOptions{
		ObjectDescription: description,
		ResyncPeriod:      resync,
	})
	// Before the informer starts, so it holds nothing but summaries.
	_ = inf.SetTransform(transform)
	return inf
}

func (s *Store) add(set map[Kind]map[string]toolscache.SharedIndexInformer, k Kind, ns string, inf toolscache.SharedIndexInformer) {
	if set[k] == nil {
		set[k] = map[string]toolscache.SharedIndexInformer{}
	}
	set[k][ns] = inf
}

// trimOther keeps of an object's metadata what Other returns: the name,
// namespace, UID and controller reference: what the names of others'
// objects cost is then a few strings each (docs/benchmarks.md measured the
// operator with 10,000 unrelated Deployments).
func trimOther(obj any) (any, error) {
	o, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil // a tombstone
	}
	t := &metav1.PartialObjectMetadata{
		TypeMeta:   o.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, UID: o.UID, ResourceVersion: o.ResourceVersion},
	}
	if c := metav1.GetControllerOfNoCopy(o); c != nil {
		t.OwnerReferences = []metav1.OwnerReference{*c}
	}
	return t, nil
}

// Other returns the name, UID and controller reference of the object of
// kind k with that key when it exists and does not carry the operator's
// label: another's object, or one of the operator's whose label was
// removed. It holds what the store's watch has seen, so an object created
// a moment ago may not be there yet.
func (s *Store) Other(k Kind, key types.NamespacedName) (*metav1.PartialObjectMetadata, bool, error) {
	return lookup[*metav1.PartialObjectMetadata](s.others, k, key)
}

// Get returns the summary of the object of kind k with that key, if the
// store holds one: an object of the operator's that exists. An object
// without the operator's label (another's, or one whose label was removed)
// is not in the store. An object the controller created or changed a
// moment ago is as its apply made it, though the watch has not shown that
// yet (RememberApplied). Its digest is that of the operator's apply when
// the apiserver records the apply otherwise (RememberNotKept).
func (s *Store) Get(k Kind, key types.NamespacedName) (*Summary, bool, error) {
	sum, found, err := lookup[*Summary](s.informers, k, key)
	if err != nil {
		return nil, false, err
	}
	if rec, ok := s.unseen(k, key, sum); ok {
		return rec, true, nil
	}
	return s.asApplied(sum), found, nil
}

// lookup returns what the informer of set for kind k and key's namespace
// holds for key, as a T.
func lookup[T any](set map[Kind]map[string]toolscache.SharedIndexInformer, k Kind, key types.NamespacedName) (T, bool, error) {
	var none T
	inf, ok := set[k][key.Namespace]
	if !ok {
		inf, ok = set[k][metav1.NamespaceAll]
	}
	if !ok {
		return none, false, fmt.Errorf("namespace %s is not watched", key.Namespace)
	}
	item, exists, err := inf.GetIndexer().GetByKey(key.String())
	if err != nil || !exists {
		return none, false, err
	}
	t, ok := item.(T)
	if !ok {
		return none, false, fmt.Errorf("the store holds a %T for %s %s", item, k, key)
	}
	return t, true, nil
}

// Start runs the informers until ctx is done.
func (s *Store) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, set := range []map[Kind]map[string]toolscache.SharedIndexInformer{s.informers, s.others} {
		for _, byNS := range set {
			for _, inf := range byNS {
				wg.Go(func() { inf.RunWithContext(ctx) })
			}
		}
	}
	wg.Wait()
	return nil
}

// NeedLeaderElection: the store runs on every replica.
func (s *Store) NeedLeaderElection() bool { return false }
