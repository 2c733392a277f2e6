package owned

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
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
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	networkingv1client "k8s.io/client-go/kubernetes/typed/networking/v1"
	policyv1client "k8s.io/client-go/kubernetes/typed/policy/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Store watches the Deployments, Services, PodDisruptionBudgets,
// NetworkPolicies and ServiceMonitors that carry the operator's label, in
// the namespaces it watches, and keeps a Summary of each. It is not the manager's cache: that cache would hand
// out summaries as if they were whole objects. Add it to the manager as a
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
	// created are the objects the controller created that the informers
	// may not have seen yet.
	createdMu sync.Mutex
	created   map[createdKey]created
	// kept holds, by object, what NotKept learned: the digest the
	// apiserver records for an apply of the operator, and the apply's own.
	keptMu sync.Mutex
	kept   map[types.UID]keptAs
}

// keptAs is an apply the apiserver records otherwise than it was sent.
type keptAs struct {
	recorded, applied Digest
}

// NotKept records what an apply that changed nothing tells of the object
// current summarizes: the apiserver keeps the operator's fields of it as
// current's digest says, although applying what has the digest applied
// should have recorded applied. It does not keep some field the operator
// sets (FieldsNotKept names them), or keeps a value otherwise. From then
// on, while the digest of what the operator owns of the object is the
// recorded one, Get gives its summary the applied digest: applying the
// same again would change nothing, and is not sent.
func (s *Store) NotKept(current *Summary, applied Digest) {
	if current.Digest == nil {
		return
	}
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	s.kept[current.UID] = keptAs{recorded: *current.Digest, applied: applied}
}

// asApplied is sum, with the digest of the apply that the apiserver
// records as sum's digest, when NotKept learned one.
func (s *Store) asApplied(sum *Summary) *Summary {
	if sum == nil || sum.Digest == nil {
		return sum
	}
	s.keptMu.Lock()
	k, ok := s.kept[sum.UID]
	s.keptMu.Unlock()
	if !ok || k.recorded != *sum.Digest {
		return sum
	}
	c := sum.DeepCopy()
	c.Digest = &k.applied
	return c
}

// gone forgets what NotKept learned of an object once it is deleted.
func (s *Store) gone(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	sum, ok := obj.(*Summary)
	if !ok {
		return
	}
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	delete(s.kept, sum.UID)
}

type created struct {
	summary *Summary
	at      time.Time
}

type createdKey struct {
	kind Kind
	key  types.NamespacedName
}

// createdMemory is how long Created remembers a creation the informer has
// not shown yet: far longer than a watch takes to deliver one.
const createdMemory = time.Minute

// Created records the summary of an object the controller just created,
// as the apiserver answered, completed with what the answer lacks: the
// digest of what it applied, and its apply's managed-fields entry (the
// time). Until the store's watch shows the object, Unseen returns it.
func (s *Store) Created(answer *Summary, applied Digest) {
	now := time.Now()
	sum := answer.DeepCopy()
	sum.Digest = &applied
	sum.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager:    FieldManager,
		Operation:  metav1.ManagedFieldsOperationApply,
		APIVersion: sum.APIVersion,
		Time:       &metav1.Time{Time: now},
	}}
	key := createdKey{sum.Kind(), types.NamespacedName{Namespace: sum.Namespace, Name: sum.Name}}
	s.createdMu.Lock()
	defer s.createdMu.Unlock()
	if _, found, _ := s.Get(key.kind, key.key); found {
		// The watch showed it already (the informer holds an object
		// before its handlers hear of it).
		return
	}
	for c, v := range s.created {
		if now.Sub(v.at) > createdMemory {
			delete(s.created, c)
		}
	}
	s.created[key] = created{summary: sum, at: now}
}

// seen forgets what Created recorded of an object once the store's watch
// shows it: from then on the watch alone tells whether it exists, and a
// deletion is not hidden by the record.
func (s *Store) seen(obj any) {
	sum, ok := obj.(*Summary)
	if !ok {
		return
	}
	s.createdMu.Lock()
	defer s.createdMu.Unlock()
	delete(s.created, createdKey{sum.Kind(), types.NamespacedName{Namespace: sum.Namespace, Name: sum.Name}})
}

// Unseen returns the summary Created recorded of the object of kind k with
// that key when the store's watch has not shown that object yet (seen
// forgets it once the watch does): the store's answer that it does not
// exist is then not to be trusted.
func (s *Store) Unseen(k Kind, key types.NamespacedName) (*Summary, bool) {
	s.createdMu.Lock()
	defer s.createdMu.Unlock()
	c, ok := s.created[createdKey{k, key}]
	if !ok {
		return nil, false
	}
	if time.Since(c.at) > createdMemory {
		delete(s.created, createdKey{k, key})
		return nil, false
	}
	return c.summary, true
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
	apps, err := appsv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	core, err := corev1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	policy, err := policyv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	networking, err := networkingv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	monitoring, err := monitoringv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	// Each kind the store watches: its REST client and resource, and the
	// type its watch decodes into.
	type watched struct {
		kind    Kind
		client  rest.Interface
		gvr     schema.GroupVersionResource
		example runtime.Object
	}
	kinds := []watched{
		{KindDeployment, apps.RESTClient(), appsv1.SchemeGroupVersion.WithResource("deployments"), &appsv1.Deployment{}},
		{KindService, core.RESTClient(), corev1.SchemeGroupVersion.WithResource("services"), &corev1.Service{}},
		{KindPodDisruptionBudget, policy.RESTClient(), policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"), &policyv1.PodDisruptionBudget{}},
		{KindNetworkPolicy, networking.RESTClient(), networkingv1.SchemeGroupVersion.WithResource("networkpolicies"), &networkingv1.NetworkPolicy{}},
	}
	if schemas.ServiceMonitors() {
		kinds = append(kinds, watched{KindServiceMonitor, monitoring.RESTClient(), monitoringv1.SchemeGroupVersion.WithResource(monitoringv1.ServiceMonitorName), &monitoringv1.ServiceMonitor{}})
	}
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	s := &Store{
		resync:    resync,
		informers: map[Kind]map[string]toolscache.SharedIndexInformer{},
		others:    map[Kind]map[string]toolscache.SharedIndexInformer{},
		created:   map[createdKey]created{},
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
			others := metadatainformer.NewFilteredMetadataInformer(meta, k.gvr, ns, 0, toolscache.Indexers{}, withSelector(others)).Informer()
			// Before the informer starts, so it holds nothing but names.
			_ = others.SetTransform(trimOther)
			s.add(s.others, k.kind, ns, others)
		}
		s.add(s.informers, KindPod, ns, newPodInformer(core.RESTClient(), ns, selector))
	}
	return s, nil
}

// byMemcached indexes pod summaries by the Memcached they are of.
const byMemcached = "memcached"

// newPodInformer is an informer of the summaries of the pods labelled with
// selector in ns, indexed by Memcached. It never resyncs: the Memcacheds'
// own objects bring the periodic look.
func newPodInformer(core rest.Interface, ns string, selector labels.Selector) toolscache.SharedIndexInformer {
	lw := toolscache.NewFilteredListWatchFromClient(core, "pods", ns, withSelector(selector))
	inf := toolscache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, toolscache.SharedIndexInformerOptions{
		ObjectDescription: "Pod summaries",
		Indexers: toolscache.Indexers{
			toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc,
			byMemcached: func(obj any) ([]string, error) {
				p, ok := obj.(*Pod)
				if !ok || p.Memcached == "" {
					return nil, nil
				}
				return []string{types.NamespacedName{Namespace: p.Namespace, Name: p.Memcached}.String()}, nil
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

// Pods returns the summaries of the pods of the Memcached of key.
func (s *Store) Pods(key types.NamespacedName) ([]*Pod, error) {
	inf, ok := s.informers[KindPod][key.Namespace]
	if !ok {
		inf, ok = s.informers[KindPod][metav1.NamespaceAll]
	}
	if !ok {
		return nil, fmt.Errorf("namespace %s is not watched", key.Namespace)
	}
	items, err := inf.GetIndexer().ByIndex(byMemcached, key.String())
	if err != nil {
		return nil, err
	}
	pods := make([]*Pod, 0, len(items))
	for _, item := range items {
		if p, ok := item.(*Pod); ok {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, nil
}

// PodSources are the controller's watches of the Memcacheds' pods, one per
// informer, each sending its events to h.
func (s *Store) PodSources(h handler.EventHandler) []source.Source {
	var out []source.Source
	for _, inf := range s.informers[KindPod] {
		out = append(out, &syncingSource{Informer: source.Informer{Informer: inf, Handler: h}, synced: inf.HasSynced})
	}
	return out
}

// withSelector sets a list or watch's label selector to sel.
func withSelector(sel labels.Selector) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) { o.LabelSelector = sel.String() }
}

// newInformer is an informer of lw's objects, each replaced by what
// transform makes of it before the informer holds it.
func newInformer(lw *toolscache.ListWatch, example runtime.Object, description string, resync time.Duration, transform toolscache.TransformFunc) toolscache.SharedIndexInformer {
	inf := toolscache.NewSharedIndexInformerWithOptions(lw, example, toolscache.SharedIndexInformerOptions{
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
// namespace, UID and controller reference. At 10,000 other Deployments in
// the cluster, that is what the names cost.
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
// is not in the store. Its digest is that of the operator's apply when the
// apiserver records the apply otherwise (NotKept).
func (s *Store) Get(k Kind, key types.NamespacedName) (*Summary, bool, error) {
	sum, found, err := lookup[*Summary](s.informers, k, key)
	return s.asApplied(sum), found, err
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

// Sources are the controller's watches of the store: one per informer,
// each sending its events to h. The controller starts reconciling once
// they are synced, so that a started operator finds what exists in the
// store and asks the apiserver nothing for it.
func (s *Store) Sources(h handler.EventHandler) []source.Source {
	var out []source.Source
	for _, k := range []Kind{KindDeployment, KindService, KindPodDisruptionBudget, KindServiceMonitor, KindNetworkPolicy} {
		for _, inf := range s.informers[k] {
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
