package owned

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
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
	// patched are the pods the controller patched that the pod informers
	// may not have shown yet, by UID.
	patchedMu sync.Mutex
	patched   map[types.UID]patched
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
		patched:   map[types.UID]patched{},
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

func (s *Store) add(set map[Kind]map[string]toolscache.SharedIndexInformer, k Kind, ns string, inf toolscache.SharedIndexInformer) {
	if set[k] == nil {
		set[k] = map[string]toolscache.SharedIndexInformer{}
	}
	set[k][ns] = inf
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
