// Package told says whether a Memcached's pods were told of what they
// mount, as the tests and benchmarks wait for it: the operator tells them
// a second or two after the membership's ConfigMap changed, and is done
// with a change only then.
package told

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
)

// Membership is nil once every running pod of m carries the version of the
// membership m's ConfigMap holds (desired.AnnotationMembershipVersion), or
// m has no such ConfigMap of its own (no discovery endpoint, or another's
// ConfigMap of that name); otherwise it says which pod was not told yet.
func Membership(ctx context.Context, r client.Reader, m *cachev1alpha1.Memcached) error {
	cm := &corev1.ConfigMap{}
	err := r.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: desired.MembershipName(m.Name)}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !metav1.IsControlledBy(cm, m):
		return nil // another's: the pods are told nothing of it
	}
	c, err := discovery.Parse([]byte(cm.Data[desired.MembershipKey]))
	if err != nil {
		return fmt.Errorf("ConfigMap %s: %w", cm.Name, err)
	}
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(m.Namespace), client.MatchingLabels(desired.SelectorLabels(m))); err != nil {
		return err
	}
	want := strconv.FormatInt(c.Version, 10)
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue // not running: it mounts what there is when it starts
		}
		if got := p.Annotations[desired.AnnotationMembershipVersion]; got != want {
			return fmt.Errorf("pod %s was told membership version %q, the ConfigMap holds %q", p.Name, got, want)
		}
	}
	return nil
}
