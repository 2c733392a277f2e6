package memcached

import (
	"context"
	"testing"

	"github.com/example/memcached-operator/pkg/owned"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestEnqueueControllerNamesTheControllingMemcached(t *testing.T) {
	ref := func(apiVersion, kind, name string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: "u", Controller: ptr.To(controller)}
	}
	tests := []struct {
		name string
		refs []metav1.OwnerReference
		want []reconcile.Request
	}{
		{"controlled by a Memcached", []metav1.OwnerReference{ref("cache.example.com/v1alpha1", "Memcached", "cache", true)},
			[]reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "cache"}}}},
		{"another version of the group", []metav1.OwnerReference{ref("cache.example.com/v1", "Memcached", "cache", true)},
			[]reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "cache"}}}},
		{"owned but not controlled", []metav1.OwnerReference{ref("cache.example.com/v1alpha1", "Memcached", "cache", false)}, nil},
		{"a Memcached of another group", []metav1.OwnerReference{ref("other.example.com/v1alpha1", "Memcached", "cache", true)}, nil},
		{"another kind of the group", []metav1.OwnerReference{ref("cache.example.com/v1alpha1", "Redis", "cache", true)}, nil},
		{"a malformed apiVersion", []metav1.OwnerReference{ref("cache.example.com/v1/x", "Memcached", "cache", true)}, nil},
		{"no owner", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cache", OwnerReferences: tt.refs}}
			enqueueController.Create(context.Background(), event.CreateEvent{Object: d}, q)

			var got []reconcile.Request
			for q.Len() > 0 {
				req, _ := q.Get()
				got = append(got, req)
				q.Done(req)
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// A pod reconciles its Memcached when what the operator keeps of it
// changes (its address, readiness, what it was told, why it is not ready),
// not on its other status changes, and on its creation or deletion only
// when it is in trouble.
func TestAPodReconcilesItsMemcachedOnlyOnWhatTheOperatorKeeps(t *testing.T) {
	pod := func(change func(p *owned.Pod)) *owned.Pod {
		p := &owned.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cache-0", UID: "p", ResourceVersion: "5"},
			Controller: "set", StatefulSet: "cache", IP: "10.0.0.1"}
		if change != nil {
			change(p)
		}
		return p
	}
	troubled := pod(func(p *owned.Pod) { p.Unschedulable = "0/1 nodes are available" })
	cache := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "cache"}}}
	tests := []struct {
		name string
		send func(q workqueue.TypedRateLimitingInterface[reconcile.Request])
		want []reconcile.Request
	}{
		{"created, starting as it should", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueMemcachedOfPod.Create(context.Background(), event.CreateEvent{Object: pod(nil)}, q)
		}, nil},
		{"created in trouble", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueMemcachedOfPod.Create(context.Background(), event.CreateEvent{Object: troubled}, q)
		}, cache},
		{"a status change the operator does not keep", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueMemcachedOfPod.Update(context.Background(), event.UpdateEvent{ObjectOld: pod(nil), ObjectNew: pod(func(p *owned.Pod) { p.ResourceVersion = "6" })}, q)
		}, nil},
		{"a new address", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueMemcachedOfPod.Update(context.Background(), event.UpdateEvent{ObjectOld: pod(nil), ObjectNew: pod(func(p *owned.Pod) { p.ResourceVersion, p.IP = "6", "10.0.0.2" })}, q)
		}, cache},
		{"in trouble", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueMemcachedOfPod.Update(context.Background(), event.UpdateEvent{ObjectOld: pod(nil), ObjectNew: troubled}, q)
		}, cache},
		{"deleted, as it was serving", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueMemcachedOfPod.Delete(context.Background(), event.DeleteEvent{Object: pod(nil)}, q)
		}, nil},
		{"deleted in trouble", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueMemcachedOfPod.Delete(context.Background(), event.DeleteEvent{Object: troubled}, q)
		}, cache},
		{"no StatefulSet controls it", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueMemcachedOfPod.Create(context.Background(), event.CreateEvent{Object: pod(func(p *owned.Pod) { p.Unschedulable, p.Controller, p.StatefulSet = "x", "", "" })}, q)
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			tt.send(q)
			var got []reconcile.Request
			for q.Len() > 0 {
				req, _ := q.Get()
				got = append(got, req)
				q.Done(req)
			}
			NewWithT(t).Expect(got).To(Equal(tt.want))
		})
	}
}
