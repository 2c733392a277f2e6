package memcached

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

// A Memcached may control a Deployment: one that the operator's versions
// before slots made, or the Operator SDK tutorial's operator, which this
// one replaces. The StatefulSet comes up beside it, and it is deleted once
// every slot is ready: its pods serve until then, so the pods that serve
// are never fewer than the Memcached's size. While it exists, the Service
// and the NetworkPolicy select by the labels its pods and the slots share
// (desired.LegacySelectorLabels; the tutorial's pods have others, and no
// Service).
//
// With the tutorial's, the field managers the tutorial wrote the
// Memcached's status with (Update) are first folded into the operator's
// status manager, so that no stale owner keeps a condition the operator
// manages, and the tutorial's finalizer, which nothing would remove any
// more, is removed.

// Event reasons of a replacement.
const (
	eventReplacing = "ReplacingDeployment"
	eventReplaced  = "ReplacedDeployment"
)

// tutorialFinalizer is the finalizer the Operator SDK tutorial's operator
// puts on every Memcached.
const tutorialFinalizer = "cache.example.com/finalizer"

// replacedDeployment is the Deployment of m's name that m controls, or nil.
// Another's Deployment of that name is not in the way of the StatefulSet,
// and left alone.
func (s *scope) replacedDeployment(ctx context.Context) (*owned.Summary, error) {
	d, err := s.current(ctx, deployments)
	if err != nil || d == nil || !metav1.IsControlledBy(d, s.m) {
		return nil, err
	}
	return d, nil
}

// eventTakeOverDisabled is the event reason of a Deployment left alone
// because the operator may not take over.
const eventTakeOverDisabled = "TakeOverDisabled"

// refuseReplacing says why old, m's Deployment that another operator made,
// is left as it is: the operator runs without --take-over. It sends
// nothing to the apiserver but the event.
func (s *scope) refuseReplacing(old *owned.Summary) string {
	msg := fmt.Sprintf("Deployment %s was made by another operator (this one never applied it), and taking it over needs the operator's --take-over flag and its role (manifests/takeover, or the chart's takeover.enabled): it is left as it is, its pods serving",
		old.Name)
	s.Recorder.Eventf(s.m, old, corev1.EventTypeWarning, eventTakeOverDisabled, "Refuse", "%s", msg)
	return msg
}

// replace takes one step of replacing old, m's Deployment, by set, m's
// StatefulSet as applied, and says where the replacement stands: old is
// deleted once every slot is updated and ready.
func (s *scope) replace(ctx context.Context, old *owned.Summary, set outcome) (string, error) {
	m := s.m
	want := desired.Replicas(m)
	serving := old.DeploymentStatus.AvailableReplicas
	d := set.obj
	if d == nil || d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < want || d.Status.AvailableReplicas < want {
		ready := int32(0)
		if d != nil {
			ready = d.Status.AvailableReplicas
		}
		note := fmt.Sprintf("Deployment %s is being replaced by StatefulSet %s: %d of %d slots ready; its %d ready pods serve until they all are",
			old.Name, m.Name, ready, want, serving)
		if set.changed && d != nil && d.Generation == 1 {
			s.Recorder.Eventf(m, old, corev1.EventTypeNormal, eventReplacing, "Replace", "%s", note)
		}
		return note, nil
	}
	ctrl.LoggerFrom(ctx).Info("Deleting the replaced Deployment: every slot is ready", "deployment", old.Name)
	obj := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: old.Name, Namespace: old.Namespace}}
	uid := old.UID
	err := s.Client.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("deleting Deployment %s: %w", old.Name, err)
	}
	note := fmt.Sprintf("Deployment %s is deleted: every one of the %d slots of StatefulSet %s is ready", old.Name, want, m.Name)
	s.Recorder.Eventf(m, old, corev1.EventTypeNormal, eventReplaced, "Delete", "%s", note)
	return note, nil
}

// missingPods tells whether d's controller has seen its spec and made
// fewer pods than it asks for.
func missingPods(d *owned.Summary) bool {
	return d.Status.ObservedGeneration >= d.Generation && d.Status.Replicas < d.DesiredReplicas()
}

// missingSince is how long to wait before d's missing pods are worth
// asking about: what is left of missingPodsRecheckInterval since the
// operator last applied d (all of it when d was applied in this reconcile,
// whose answer carries no time), and then missingPodsRecheckInterval.
func (s *scope) missingSince(d *owned.Summary) time.Duration {
	t := d.LastApplied()
	if t == nil {
		return missingPodsRecheckInterval
	}
	if left := t.Add(missingPodsRecheckInterval).Sub(s.now()); left > 0 {
		return min(left, missingPodsRecheckInterval)
	}
	return missingPodsRecheckInterval
}

// createFailed is why the StatefulSet controller last failed to create a
// pod of d (its latest FailedCreate event), while d has lacked pods for
// missingPodsRecheckInterval since the operator last applied it: empty
// otherwise, or when the controller said nothing. It reads the events
// only then: a Memcached at rest has all its pods, and one just created or
// scaled gets them within moments.
func (s *scope) createFailed(ctx context.Context, d *owned.Summary) (string, error) {
	if d == nil || !missingPods(d) {
		return "", nil
	}
	if t := d.LastApplied(); t == nil || s.now().Sub(t.Time) < missingPodsRecheckInterval {
		return "", nil
	}
	list := &corev1.EventList{}
	err := s.APIReader.List(ctx, list, client.InNamespace(d.Namespace),
		client.MatchingFields{"involvedObject.uid": string(d.UID), "reason": "FailedCreate"})
	if err != nil {
		return "", fmt.Errorf("listing the events of StatefulSet %s: %w", d.Name, err)
	}
	if len(list.Items) == 0 {
		return "", nil
	}
	latest := slices.MaxFunc(list.Items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	return latest.Message, nil
}

// eventTime is when e last happened.
func eventTime(e corev1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// adoptFieldManagers folds the Update field managers s.ReplacedManagers
// of m's status into the operator's status manager, and removes the
// tutorial's finalizer. It reads m from the apiserver: the cache keeps no
// other manager's entries.
func (s *scope) adoptFieldManagers(ctx context.Context) error {
	m := s.m
	live := &cachev1alpha1.Memcached{}
	if err := s.APIReader.Get(ctx, client.ObjectKeyFromObject(m), live); err != nil {
		return client.IgnoreNotFound(err)
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(s.ReplacedManagers...), owned.StatusFieldManager, csaupgrade.Subresource("status"))
	if err != nil {
		return fmt.Errorf("upgrading the field managers of Memcached %s: %w", m.Name, err)
	}
	if patch != nil {
		ctrl.LoggerFrom(ctx).Info("Folding the replaced operator's status field managers into the operator's", "managers", s.ReplacedManagers)
		if err := s.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch)); err != nil {
			return fmt.Errorf("upgrading the field managers of Memcached %s: %w", m.Name, err)
		}
	}
	if i := slices.Index(live.Finalizers, tutorialFinalizer); i >= 0 {
		ctrl.LoggerFrom(ctx).Info("Removing the replaced operator's finalizer", "finalizer", tutorialFinalizer)
		path := fmt.Sprintf("/metadata/finalizers/%d", i)
		remove, err := json.Marshal([]map[string]any{
			{"op": "test", "path": path, "value": tutorialFinalizer},
			{"op": "remove", "path": path},
		})
		if err != nil {
			return err
		}
		if err := s.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, remove)); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	return nil
}
