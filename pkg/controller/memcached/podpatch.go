package memcached

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/pkg/owned"
)

// patchPod sends a JSON patch of p, and tells whether the apiserver
// applied it. Its tests (p's UID, what p held as the store saw it) keep it
// from another pod of p's name and from a pod already patched: a patch
// whose test fails is not applied, and the next reconcile reads the pod
// anew. A JSON patch never creates a pod.
func (s *scope) patchPod(ctx context.Context, p *owned.Pod, ops []map[string]any) (bool, error) {
	patch, err := json.Marshal(ops)
	if err != nil {
		return false, err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	err = s.Client.Patch(ctx, pod, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(owned.FieldManager))
	switch {
	case apierrors.IsNotFound(err):
		return false, nil // replaced meanwhile: its successor is the template's
	case failedTest(err):
		ctrl.LoggerFrom(ctx).V(1).Info("Not patching a pod the store holds an older version of", "pod", p.Name)
		s.podPatchLetGo = true
		return false, nil
	case err != nil:
		return false, fmt.Errorf("patching pod %s: %w", p.Name, err)
	}
	return true, nil
}

// failedTest tells whether err is the apiserver's answer to a JSON patch
// it could not apply to the object as it is: a test operation that failed,
// or a path to remove that is no longer there. The apiserver answers both
// alike, Invalid (422) with a generic message and no cause, naming neither
// the object nor a field (the patch's own error is not passed on), where a
// patched object it refuses is Invalid with its kind, name and the fields'
// errors. The operator's patches only remove what the store showed, after
// testing what the store held: either means the store holds an older
// version of the object.
func failedTest(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || (len(d.Causes) == 0 && d.Name == "" && d.Kind == "")
}

// jsonPointerEscape escapes a map key for a JSON pointer (RFC 6901).
func jsonPointerEscape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// replacePod deletes p, which its StatefulSet's controller makes anew from
// the template: its cache starts empty.
func (s *scope) replacePod(ctx context.Context, p *owned.Pod, why string) error {
	ctrl.LoggerFrom(ctx).Info("Replacing a pod", "pod", p.Name, "why", why)
	uid := p.UID
	err := s.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}, client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s: %w", p.Name, err)
	}
	s.Owned.RememberDeleted(p)
	cache := "its cache starts empty"
	if s.handsOff() {
		cache = "its keys are on the other slots until the new pod serves, and then come back"
	}
	s.podEvent(p, corev1.EventTypeNormal, eventReplacingPod, "Replace",
		"Pod %s is replaced: %s; %s", p.Name, why, cache)
	return nil
}
