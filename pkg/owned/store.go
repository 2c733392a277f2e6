package owned

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Store watches the Deployments, Services and PodDisruptionBudgets that
// carry the operator's label, in the namespaces it watches, and keeps a
// Summary of each. It is not the manager's cache: that cache would hand
// out summaries as if they were whole objects. Add it to the manager as a
// Runnable; it runs on every replica, leader or not, so that a new leader
// starts with it filled.
type Store struct {
	factories []informers.SharedInformerFactory
	// informers of each kind, by namespace ("" when watching all).
	informers map[Kind]map[string]toolscache.SharedIndexInformer
}

// NewStore returns a Store of the objects of cs labelled with selector in
// namespaces (all namespaces when empty).
func NewStore(cs kubernetes.Interface, namespaces []string, selector labels.Selector) *Store {
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	s := &Store{informers: map[Kind]map[string]toolscache.SharedIndexInformer{}}
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0,
			informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector.String() }),
			informers.WithTransform(summarize),
		)
		s.factories = append(s.factories, f)
		s.add(KindDeployment, ns, f.Apps().V1().Deployments().Informer())
		s.add(KindService, ns, f.Core().V1().Services().Informer())
		s.add(KindPodDisruptionBudget, ns, f.Policy().V1().PodDisruptionBudgets().Informer())
	}
	return s
}

func (s *Store) add(k Kind, ns string, inf toolscache.SharedIndexInformer) {
	if s.informers[k] == nil {
		s.informers[k] = map[string]toolscache.SharedIndexInformer{}
	}
	s.informers[k][ns] = inf
}

// summarize is the informers' transform: it replaces each object as the
// watch delivers it by its Summary.
func summarize(obj any) (any, error) {
	o, ok := obj.(client.Object)
	if !ok {
		return obj, nil // a tombstone: its object was summarized before
	}
	return Summarize(o)
}

// Get returns the summary of the object of kind k with that key, if the
// store holds one: an object of the operator's that exists. An object
// without the operator's label (another's, or one whose label was removed)
// is not in the store.
func (s *Store) Get(k Kind, key types.NamespacedName) (*Summary, bool, error) {
	inf, ok := s.informers[k][key.Namespace]
	if !ok {
		inf, ok = s.informers[k][""]
	}
	if !ok {
		return nil, false, fmt.Errorf("namespace %s is not watched", key.Namespace)
	}
	item, exists, err := inf.GetIndexer().GetByKey(key.String())
	if err != nil || !exists {
		return nil, false, err
	}
	sum, ok := item.(*Summary)
	if !ok {
		return nil, false, fmt.Errorf("the store holds a %T for %s %s", item, k, key)
	}
	return sum, true, nil
}

// Sources are the controller's watches of the store: one per informer,
// each sending its events to h. The controller starts reconciling once
// they are synced, so that a started operator finds what exists in the
// store and asks the apiserver nothing for it.
func (s *Store) Sources(h handler.EventHandler) []source.Source {
	var out []source.Source
	for _, k := range []Kind{KindDeployment, KindService, KindPodDisruptionBudget} {
		for _, inf := range s.informers[k] {
			out = append(out, &syncingSource{Informer: source.Informer{Informer: inf, Handler: h}, synced: inf.HasSynced})
		}
	}
	return out
}

// syncingSource is an informer source the controller waits on before its
// first reconcile.
type syncingSource struct {
	source.Informer
	synced toolscache.InformerSynced
}

func (s *syncingSource) WaitForSync(ctx context.Context) error {
	if !toolscache.WaitForCacheSync(ctx.Done(), s.synced) {
		return fmt.Errorf("waiting for %s to sync: %w", s.String(), ctx.Err())
	}
	return nil
}

// Start runs the informers until ctx is done.
func (s *Store) Start(ctx context.Context) error {
	for _, f := range s.factories {
		f.Start(ctx.Done())
	}
	<-ctx.Done()
	for _, f := range s.factories {
		f.Shutdown()
	}
	return nil
}

// NeedLeaderElection: the store runs on every replica.
func (s *Store) NeedLeaderElection() bool { return false }

// Synced waits at most timeout for every informer to have listed its objects.
func (s *Store) Synced(ctx context.Context, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, byNS := range s.informers {
		for _, inf := range byNS {
			if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				return false
			}
		}
	}
	return true
}
