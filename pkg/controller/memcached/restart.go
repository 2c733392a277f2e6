package memcached

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/podlog"
	"github.com/example/memcached-operator/pkg/settings"
)

// confirmRestart reads what the warm runner of p's restarted memcached
// said of its cache, and tells it: on the pod (desired.AnnotationWarmRestart,
// which ends the restart) and in an event. The runner says it once
// memcached serves, which the pod's readiness can tell first: done is false
// while it has not said yet, for runnerSayWait after its log began; then,
// or at once where the log is empty (no runner), the restart is ended with
// what it said, nothing.
func (s *scope) confirmRestart(ctx context.Context, p *owned.Pod, want *appsv1ac.StatefulSetApplyConfiguration) (bool, error) {
	said, done, err := s.runnersWord(ctx, p)
	if err != nil || !done {
		return false, err
	}
	image := owned.TemplateImages(want.Spec.Template)[owned.ContainerImage{Name: desired.ContainerName}.Key()]
	ctrl.LoggerFrom(ctx).Info("memcached restarted in place", "pod", p.Name, "restored", said.IsRestore(), "items", said.Items)
	return true, s.endRestart(ctx, p, said, "with image "+image)
}

// runnersWord is what the warm runner of p's memcached said of the cache
// at its start; done is false while it is still to be waited for.
func (s *scope) runnersWord(ctx context.Context, p *owned.Pod) (podlog.Start, bool, error) {
	limit := int64(logLimitBytes)
	log, err := s.Logs.Read(ctx, p.Namespace, p.Name, &corev1.PodLogOptions{Container: desired.ContainerName, LimitBytes: &limit})
	if err != nil {
		return podlog.Start{}, false, fmt.Errorf("reading the log of pod %s's memcached: %w", p.Name, err)
	}
	said, ok := podlog.FirstStart(log, nil)
	if ok {
		return said, true, nil
	}
	// An empty log: no runner, which says it starts memcached before
	// memcached can serve.
	started, err := s.logStarted(ctx, p)
	if err != nil || (!started.IsZero() && s.now().Sub(started) < runnerSayWait) {
		return podlog.Start{}, false, err
	}
	return podlog.Start{}, true, nil
}

// runnerSayWait is how long after memcached's container started the warm
// runner is waited for to say what it restored.
const runnerSayWait = 30 * time.Second

// logStarted is when the log of p's memcached container began (its first
// line's time, as the kubelet stamps it), or zero before it has a line.
func (s *scope) logStarted(ctx context.Context, p *owned.Pod) (time.Time, error) {
	limit := int64(128)
	log, err := s.Logs.Read(ctx, p.Namespace, p.Name, &corev1.PodLogOptions{Container: desired.ContainerName, LimitBytes: &limit, Timestamps: true})
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the log of pod %s's memcached: %w", p.Name, err)
	}
	stamp, _, _ := strings.Cut(string(log), " ")
	t, err := time.Parse(time.RFC3339Nano, stamp)
	if err != nil {
		return time.Time{}, nil
	}
	return t, nil
}

// confirmSettingsRestart reads, in the log of p's memcached since new
// settings were set on p, whether its warm runner restarted memcached on
// them, and if it did, tells it as confirmRestart does. done: it did (or
// the annotation is not the operator's, and the restart is ended
// unconfirmed).
func (s *scope) confirmSettingsRestart(ctx context.Context, p *owned.Pod, want *appsv1ac.StatefulSetApplyConfiguration) (bool, error) {
	since, err := time.Parse(time.RFC3339, strings.TrimPrefix(p.RestartingFrom, desired.RestartingForSettings))
	if err != nil {
		// Not the operator's: end it as unconfirmed.
		return true, s.endRestart(ctx, p, podlog.Start{}, "with new settings")
	}
	settings := want.Spec.Template.Annotations[desired.AnnotationMemcachedSettings]
	if !p.Ready || p.Annotations[desired.AnnotationMemcachedSettings] != settings {
		return false, nil
	}
	// memcached's own lines come between the runner's (all of them at
	// -vv): as much is read as podlog reads.
	limit := int64(podlog.ReadLimit)
	log, err := s.Logs.Read(ctx, p.Namespace, p.Name, &corev1.PodLogOptions{
		Container: desired.ContainerName, LimitBytes: &limit, SinceTime: &metav1.Time{Time: since},
	})
	if err != nil {
		return false, fmt.Errorf("reading the log of pod %s's memcached: %w", p.Name, err)
	}
	said, ok := podlog.FirstStart(log, settingsOf(settings))
	if !ok {
		return false, nil // not yet
	}
	ctrl.LoggerFrom(ctx).Info("memcached restarted in place for new settings", "pod", p.Name, "restored", said.IsRestore(), "items", said.Items)
	return true, s.endRestart(ctx, p, said, "with settings "+settingsText(settings))
}

// endRestart ends p's restart in place: it removes
// desired.AnnotationRestartingFrom and says what memcached kept, on the pod
// (desired.AnnotationWarmRestart) and in an event, once.
func (s *scope) endRestart(ctx context.Context, p *owned.Pod, said podlog.Start, with string) error {
	restarting := "/metadata/annotations/" + jsonPointerEscape(desired.AnnotationRestartingFrom)
	sent, err := s.patchPod(ctx, p, []map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": p.UID},
		// Told once, whatever the store holds yet.
		{"op": "test", "path": restarting, "value": p.RestartingFrom},
		{"op": "remove", "path": restarting},
		{"op": "add", "path": "/metadata/annotations/" + jsonPointerEscape(desired.AnnotationWarmRestart), "value": said.String()},
	})
	switch {
	case !sent:
	case said.IsRestore():
		s.podEvent(p, corev1.EventTypeNormal, eventRestartedWarm, "Restart",
			"Pod %s restarted memcached in place %s: %s", p.Name, with, said)
	case s.handsOff():
		s.podEvent(p, corev1.EventTypeNormal, eventRestartedEmpty, "Restart",
			"Pod %s restarted memcached in place %s, empty: %s; its keys, handed to the other slots, come back", p.Name, with, said)
	default:
		s.podEvent(p, corev1.EventTypeWarning, eventRestartedEmpty, "Restart",
			"Pod %s restarted memcached in place %s, and its cache is empty: %s", p.Name, with, said)
	}
	return err
}

// settingsOf are the flags of desired.AnnotationMemcachedSettings, as the
// warm runner takes them (never nil).
func settingsOf(annotation string) []string {
	flags, _ := settings.Parse(annotation)
	return flags
}

// settingsText is desired.AnnotationMemcachedSettings on one line.
func settingsText(annotation string) string {
	flags := settingsOf(annotation)
	if len(flags) == 0 {
		return "(memcached's defaults)"
	}
	return strings.Join(flags, " ")
}

// rolloutPods are the pods of a Memcached's slots, sorted by what its
// rollout does with them.
type rolloutPods struct {
	slots []*owned.Pod
	// outdated run an older revision; notReadyOutdated too, and serve
	// nothing.
	outdated, notReadyOutdated []*owned.Pod
	// waiting says what the next pod to change waits for ("": nothing);
	// result when to look again meanwhile.
	waiting string
	result  ctrl.Result
}

// confirmAndSortPods sorts the pods of the slots by what the rollout to
// revision, want's template, does with them; on the way it confirms the
// restarts in place that ended, and replaces the pods the node cannot
// resize.
func (s *scope) confirmAndSortPods(ctx context.Context, revision string, want *appsv1ac.StatefulSetApplyConfiguration) (rolloutPods, error) {
	var out rolloutPods
	for _, p := range s.obs.Pods {
		k, ok := ordinal(p.Name, s.m.Name)
		if !ok || k >= desired.Replicas(s.m) {
			continue // a removed slot's: its controller removes it
		}
		out.slots = append(out.slots, p)
		switch {
		case p.Deleting:
			out.waiting = fmt.Sprintf("pod %s is being replaced", p.Name)
		case p.Revision != revision && !p.Ready:
			// A restart of it that does not get on (an image that cannot
			// start) is mended by the next change.
			out.notReadyOutdated = append(out.notReadyOutdated, p)
		case p.Revision != revision:
			out.outdated = append(out.outdated, p)
			if p.RestartingFrom != "" {
				out.waiting = fmt.Sprintf("memcached is restarting in place in pod %s", p.Name)
			}
		default:
			waiting, result, err := s.confirmPod(ctx, p, want)
			if err != nil {
				return out, err
			}
			out.waiting = cmp.Or(waiting, out.waiting)
			out.result = sooner(out.result, result)
		}
	}
	return out, nil
}

// confirmPod looks at p, a pod of the template's revision: it replaces it
// if the node cannot resize it, and confirms its restart in place once
// memcached says it restarted. waiting says what p waits for, if anything.
func (s *scope) confirmPod(ctx context.Context, p *owned.Pod, want *appsv1ac.StatefulSetApplyConfiguration) (string, ctrl.Result, error) {
	switch {
	case p.ResizeFailed:
		// The kubelet cannot make the resize: a new pod takes it.
		if err := s.replacePod(ctx, p, "the node cannot resize it in place: "+p.Resizing); err != nil {
			return "", ctrl.Result{}, err
		}
		return fmt.Sprintf("pod %s is being replaced", p.Name), ctrl.Result{}, nil
	case resizing(p):
		return fmt.Sprintf("pod %s resizes in place", p.Name), ctrl.Result{}, nil
	case strings.HasPrefix(p.RestartingFrom, desired.RestartingForSettings):
		done, err := s.confirmSettingsRestart(ctx, p, want)
		if err != nil || done {
			return "", ctrl.Result{}, err
		}
		return fmt.Sprintf("memcached is restarting in place in pod %s for new settings", p.Name), ctrl.Result{RequeueAfter: settingsPoll}, nil
	case p.RestartingFrom != "":
		if !restarted(p, want) {
			return fmt.Sprintf("memcached is restarting in place in pod %s", p.Name), ctrl.Result{}, nil
		}
		done, err := s.confirmRestart(ctx, p, want)
		if err != nil || done {
			return "", ctrl.Result{}, err
		}
		return fmt.Sprintf("the warm runner in pod %s has not said yet what memcached restored", p.Name), ctrl.Result{RequeueAfter: settingsPoll}, nil
	case !p.Ready:
		return fmt.Sprintf("pod %s is not ready", p.Name), ctrl.Result{}, nil
	}
	return "", ctrl.Result{}, nil
}
