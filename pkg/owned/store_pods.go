package owned

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/example/memcached-operator/pkg/reconnect"
)

// byController indexes pod summaries by the UID of the StatefulSet that
// controls them.
const byController = "controller"

// newPodInformer is an informer of the summaries of the pods labelled with
// selector in ns, indexed by the StatefulSet that controls them. It never resyncs: the Memcacheds'
// own objects bring the periodic look.
func newPodInformer(core rest.Interface, ns string, selector labels.Selector) toolscache.SharedIndexInformer {
	lw := toolscache.NewFilteredListWatchFromClient(core, "pods", ns, withSelector(selector))
	inf := toolscache.NewSharedIndexInformerWithOptions(reconnect.ListWatch(lw), &corev1.Pod{}, toolscache.SharedIndexInformerOptions{
		ObjectDescription: "Pod summaries",
		Indexers: toolscache.Indexers{
			toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc,
			byController: func(obj any) ([]string, error) {
				p, ok := obj.(*Pod)
				if !ok || p.Controller == "" {
					return nil, nil
				}
				return []string{string(p.Controller)}, nil
			},
		},
	})
	// Before the informer starts, so it holds nothing but summaries.
	_ = inf.SetTransform(func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			return SummarizePod(p), nil
		}
		return obj, nil // a tombstone: its object was summarized before
	})
	return inf
}

// Pods returns the summaries of the pods in namespace that the
// StatefulSet of UID controller controls: as the store's watch shows them,
// or as the operator's last patch of one made it while the watch has not
// shown that yet (RememberPatched).
func (s *Store) Pods(namespace string, controller types.UID) ([]*Pod, error) {
	inf, ok := s.informers[kindPod][namespace]
	if !ok {
		inf, ok = s.informers[kindPod][metav1.NamespaceAll]
	}
	if !ok {
		return nil, fmt.Errorf("namespace %s is not watched", namespace)
	}
	items, err := inf.GetIndexer().ByIndex(byController, string(controller))
	if err != nil {
		return nil, err
	}
	pods := make([]*Pod, 0, len(items))
	for _, item := range items {
		if p, ok := item.(*Pod); ok {
			pods = append(pods, s.unseenPatch(p))
		}
	}
	slices.SortFunc(pods, func(a, b *Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, nil
}

// patched is the apiserver's answer to a patch of a pod by the operator
// that the store's watch has not shown yet.
type patched struct {
	pod *Pod
	at  time.Time
	// deleted: the operator deleted the pod, whose summary (pod) is the
	// store's at the delete, marked Deleting; a later version shows it.
	deleted bool
}

// RememberPatched records answer, the apiserver's answer to the operator's
// patch of a pod. Until the store's watch shows the pod at that version or
// a later one, Pods gives its summary in the watch's stead: a reconcile
// that a watch event starts in between sees what the patch made, and does
// not send it again.
func (s *Store) RememberPatched(answer *corev1.Pod) {
	s.rememberPod(patched{pod: SummarizePod(answer), at: time.Now()})
}

// RememberDeleted records that the operator deleted p, which the store
// held as p: until its watch shows a later version of the pod, Pods gives
// it as being deleted, so that a reconcile in between does not delete it
// again (and meet its UID precondition failing).
func (s *Store) RememberDeleted(p *Pod) {
	gone := p.DeepCopy()
	gone.Deleting = true
	s.rememberPod(patched{pod: gone, at: time.Now(), deleted: true})
}

// rememberPod records rec of its pod, and forgets the records older than
// appliedMemory: those of pods the watch no longer shows (gone) are never
// looked up again.
func (s *Store) rememberPod(rec patched) {
	s.patchedMu.Lock()
	defer s.patchedMu.Unlock()
	for k, v := range s.patched {
		if rec.at.Sub(v.at) > appliedMemory {
			delete(s.patched, k)
		}
	}
	s.patched[rec.pod.UID] = rec
}

// unseenPatch is p, the watch's summary of a pod, or the answer to the
// operator's patch of it while the watch shows a version before that.
func (s *Store) unseenPatch(p *Pod) *Pod {
	s.patchedMu.Lock()
	defer s.patchedMu.Unlock()
	rec, ok := s.patched[p.UID]
	if !ok {
		return p
	}
	c, err := resourceversion.CompareResourceVersion(p.ResourceVersion, rec.pod.ResourceVersion)
	if rec.deleted {
		c-- // the version deleted is the one recorded: a later one shows it
	}
	if err != nil || c >= 0 || time.Since(rec.at) > appliedMemory {
		delete(s.patched, p.UID)
		return p
	}
	return rec.pod
}

// PodSources are the controller's watches of the Memcacheds' pods, one per
// informer, each sending its events to h.
func (s *Store) PodSources(h handler.EventHandler) []source.Source {
	var out []source.Source
	for _, inf := range s.informers[kindPod] {
		out = append(out, &syncingSource{Informer: source.Informer{Informer: inf, Handler: h}, synced: inf.HasSynced})
	}
	return out
}
