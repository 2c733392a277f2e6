package owned

import (
	"context"
	"fmt"
	"net/http"
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
	"k8s.io/apimachinery/pkg/watch"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	networkingv1client "k8s.io/client-go/kubernetes/typed/networking/v1"
	policyv1client "k8s.io/client-go/kubernetes/typed/policy/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/example/memcached-operator/pkg/reconnect"
)

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
