package memcached

import (
	"context"
	"testing"

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
