package owned

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Sources are the controller's watches of the store: one per informer,
// each sending its events to h. The controller starts reconciling once
// they are synced, so that a started operator finds what exists in the
// store and asks the apiserver nothing for it.
func (s *Store) Sources(h handler.EventHandler) []source.Source {
	var out []source.Source
	for _, d := range Kinds {
		for _, inf := range s.informers[d.Kind] {
			out = append(out, &syncingSource{Informer: source.Informer{Informer: inf, Handler: h}, synced: inf.HasSynced})
		}
	}
	return out
}

// OtherSources are the controller's watches of the names of other objects:
// one per informer, each sending its events to h, which decides which of
// them matter (a name a Memcached wants being freed, say). The controller
// starts reconciling once they are synced too, so that a name taken before
// it started is known to be taken.
func (s *Store) OtherSources(h handler.EventHandler) []source.Source {
	var out []source.Source
	for _, byNS := range s.others {
		for _, inf := range byNS {
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
