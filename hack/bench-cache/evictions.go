package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
)

// drainWithin bounds a drain of the operations' Memcached: three hand-offs,
// each a copy, the clients' poll, the pod's restart and the move back.
const drainWithin = 10 * time.Minute

// evict evicts the pods of slots through the Eviction API as kubectl
// drain does: each pod not yet evicted is asked for again every 2 s while
// the disruption budget refuses it. The pods evicted are kept in
// o.evicted.
func (o *opsRun) evict(slots ...int) error {
	o.evicted = nil
	left := map[string]bool{}
	for _, k := range slots {
		left[fmt.Sprintf("%s-%d", opsName, k)] = true
	}
	return wait.PollUntilContextTimeout(o.ctx, 2*time.Second, drainWithin, true, func(ctx context.Context) (bool, error) {
		for name := range left {
			p := &corev1.Pod{}
			if err := o.e.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, p); err != nil {
				return false, err
			}
			eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
				DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}}
			err := o.e.c.SubResource("eviction").Create(ctx, p, eviction)
			switch {
			case apierrors.IsTooManyRequests(err):
				continue
			case err != nil:
				return false, fmt.Errorf("evicting %s: %w", name, err)
			}
			o.evicted = append(o.evicted, p)
			delete(left, name)
		}
		return len(left) == 0, nil
	})
}

// evictedReplaced waits until every pod evicted or deleted has a successor.
func (o *opsRun) evictedReplaced() error {
	return wait.PollUntilContextTimeout(o.ctx, 250*time.Millisecond, drainWithin, true, func(ctx context.Context) (bool, error) {
		for _, gone := range o.evicted {
			p := &corev1.Pod{}
			if err := o.e.c.Get(ctx, client.ObjectKeyFromObject(gone), p); err != nil || p.UID == gone.UID {
				return false, nil
			}
		}
		return true, nil
	})
}

// deleteWith deletes the pods of slots with opts (a grace period of 0, as
// kubectl delete --grace-period=0 --force does: its API object goes at
// once, so the operator never sees it being deleted; nil: the pod's own),
// one right after the other as kubectl delete of several does, and keeps
// them in o.evicted.
func (o *opsRun) deleteWith(opts client.DeleteOption, slots ...int) error {
	o.evicted = nil
	for _, slot := range slots {
		p := &corev1.Pod{}
		if err := o.e.c.Get(o.ctx, client.ObjectKey{Namespace: namespace, Name: fmt.Sprintf("%s-%d", opsName, slot)}, p); err != nil {
			return err
		}
		o.evicted = append(o.evicted, p)
	}
	var del []client.DeleteOption
	if opts != nil {
		del = append(del, opts)
	}
	for _, p := range o.evicted {
		if err := o.e.c.Delete(o.ctx, p, del...); err != nil {
			return err
		}
	}
	return nil
}

// deleteAtPublication deletes the pod of slot first with its grace period,
// waits until the membership published lacks that slot (its hand-off
// published), and deletes the pod of slot second at once: before the
// operator tells that pod of the new membership (a second or two), so that
// it hands off from the one that lists both.
func (o *opsRun) deleteAtPublication(first, second int) error {
	if err := o.deleteWith(nil, first); err != nil {
		return err
	}
	gone := o.evicted
	host := desired.SlotHost(opsName, namespace, first)
	key := client.ObjectKey{Namespace: namespace, Name: desired.MembershipName(opsName)}
	err := wait.PollUntilContextTimeout(o.ctx, 50*time.Millisecond, drainWithin, true, func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := o.e.c.Get(ctx, key, cm); err != nil {
			return false, err
		}
		c, err := discovery.Parse([]byte(cm.Data[desired.MembershipKey]))
		return err == nil && len(c.Nodes) > 0 && !slices.ContainsFunc(c.Nodes, func(n discovery.Node) bool { return n.Host == host }), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the membership without slot %d: %w", first, err)
	}
	if err := o.deleteWith(nil, second); err != nil {
		return err
	}
	o.evicted = append(gone, o.evicted...)
	return nil
}
