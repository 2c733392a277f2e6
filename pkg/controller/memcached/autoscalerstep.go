package memcached

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	cacheac "github.com/example/memcached-operator/applyconfig/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/autoscale"
	"github.com/example/memcached-operator/pkg/owned"
)

// read reads the signals of m's ready pods, at once, and adds the sample
// they make to st's history; it says which pods could not be read (empty:
// all were).
func (a *Autoscaler) read(ctx context.Context, m *cachev1alpha1.Memcached, p autoscale.Policy, st *autoscaled, now time.Time) string {
	pods, err := a.Pods(m)
	if err != nil {
		return "the pods cannot be listed: " + err.Error()
	}
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		ids    = map[string]string{}
		read   = map[string]autoscale.Signals{}
		failed []string
	)
	for _, pod := range pods {
		if !pod.Ready || pod.IP == "" || pod.Deleting {
			continue
		}
		wg.Go(func() {
			sig, err := a.Read(ctx, pod.IP, int64(p.Down/time.Second))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", pod.Name, err))
				return
			}
			ids[pod.Name], read[pod.Name] = string(pod.UID)+"/"+pod.MemcachedID, sig
		})
	}
	wg.Wait()
	st.history.Add(now, ids, read)
	if len(failed) > 0 {
		sort.Strings(failed)
		return "cannot read the signals of " + strings.Join(failed, "; ")
	}
	return ""
}

// step sets m's spec.size to d's through its scale subresource, as an
// HPA does, under AutoscalerFieldManager, and says so in an event. The
// size is taken from a manager that wrote it once (an Update: kubectl
// create, edit or scale), never from one that applies it (Argo CD, Flux,
// kubectl apply --server-side), which would write it back: the decision
// it returns is then Blocked, naming that manager, as it is when the size
// cannot be set.
func (a *Autoscaler) step(ctx context.Context, m *cachev1alpha1.Memcached, st *autoscaled, d autoscale.Decision, now time.Time) autoscale.Decision {
	from := st.size
	took, appliers, version, err := a.sizeOwners(ctx, m)
	if err == nil && len(appliers) > 0 {
		return autoscale.Decision{Next: autoscale.Blocked, To: from, Cause: "size applied by another", Reason: fmt.Sprintf(
			"a step from %d to %d slots is due (%s), but %s applies spec.size: leave size out of what it applies", from, d.To, d.Reason, strings.Join(appliers, " and "))}
	}
	if err == nil {
		err = a.patchSize(ctx, m, d.To, version)
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Cannot scale the Memcached", "memcached", client.ObjectKeyFromObject(m), "size", d.To)
		return autoscale.Decision{Next: autoscale.Blocked, To: from, Cause: "size not set",
			Reason: fmt.Sprintf("a step from %d to %d slots is due (%s), but the size cannot be set: %v", from, d.To, d.Reason, err)}
	}
	said := fmt.Sprintf("scaled from %d to %d slots: %s", from, d.To, d.Reason)
	if took != "" {
		said += "; spec.size taken from " + took
	}
	a.mu.Lock()
	st.lastScale, st.lastScaleTime = said, now
	a.mu.Unlock()
	a.Recorder.Eventf(m, nil, corev1.EventTypeNormal, eventScaled, "Autoscale", "Autoscaling %s", said)
	autoscalingSteps.WithLabelValues(m.Namespace, m.Name, d.Next).Inc()
	return d
}

// patchSize sets m's spec.size through its scale subresource, if m is
// still at version (a conflict otherwise: the next reading decides again).
// Not an apply: the apiserver refuses one on a custom resource's scale
// subresource ("request to convert CR to an invalid group/version:
// autoscaling/v1"), and an apply of the Memcached itself would need the
// right to patch all of it, which the operator does not have.
func (a *Autoscaler) patchSize(ctx context.Context, m *cachev1alpha1.Memcached, size int32, version string) error {
	patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"replicas":%d}}`, version, size)
	return a.Client.SubResource("scale").Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(patch)),
		&client.SubResourcePatchOptions{SubResourceBody: &autoscalingv1.Scale{}, PatchOptions: client.PatchOptions{FieldManager: AutoscalerFieldManager}})
}

// sizePath is spec.size's path in managed fields.
var sizePath = fieldpath.MakePathOrDie("spec", "size")

// sizeOwners are the other managers of m's spec.size, read from the
// apiserver (the cache keeps no other manager's fields) at version: those
// that wrote it once, and those that apply it.
func (a *Autoscaler) sizeOwners(ctx context.Context, m *cachev1alpha1.Memcached) (updaters string, appliers []string, version string, err error) {
	now := &cachev1alpha1.Memcached{}
	if err := a.APIReader.Get(ctx, client.ObjectKeyFromObject(m), now); err != nil {
		return "", nil, "", err
	}
	owners, err := owned.OwnersOf(now.ManagedFields, sizePath, AutoscalerFieldManager)
	if err != nil {
		return "", nil, "", err
	}
	var updated []string
	for _, e := range owners {
		if e.Operation == metav1.ManagedFieldsOperationApply {
			appliers = append(appliers, e.Manager)
		} else {
			updated = append(updated, e.Manager)
		}
	}
	return strings.Join(updated, " and "), appliers, now.ResourceVersion, nil
}

// Status is what m's status tells of its autoscaling: nil before its
// first reading, or without spec.autoscaling.
func (a *Autoscaler) Status(key types.NamespacedName) *cacheac.AutoscalingStatusApplyConfiguration {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	st, ok := a.state[key]
	if !ok || st.shown.Next == "" {
		return nil
	}
	out := cacheac.AutoscalingStatus().WithNext(st.shown.Next).WithReason(truncate(st.shown.Reason, 1024))
	if !st.lastScaleTime.IsZero() {
		out.WithLastScaleTime(metav1.NewTime(st.lastScaleTime).Rfc3339Copy()).WithLastScale(truncate(st.lastScale, 1024))
	}
	return out
}

func (a *Autoscaler) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
