package memcached

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

// Where memcached runs warm, the operator rolls the StatefulSet's pods
// (its update strategy is OnDelete), one slot at a time from the last, as
// the StatefulSet controller would, with one difference: a pod whose shape
// is the template's (desired.AnnotationPodShape: they differ in images
// only) is not replaced but brought to the template in place. The
// operator sets its images, labels, annotations and its revision label;
// the kubelet restarts the containers whose image changed, and memcached's,
// stopped by the warm runner, saves its cache and restores it. New
// settings memcached takes in its container (desired.ContainerSettings) are an annotation
// the kubelet writes to a file of the pod: the runner restarts memcached
// warm in its container to take them. The next slot waits until the
// restart is confirmed: the pod ready on a new memcached container (or,
// for settings, the runner's word on the new ones), whose runner said how
// many items memcached restored (its log), which the pod's
// desired.AnnotationWarmRestart and an event then tell.
//
// A new memory limit or maximum item size is a setting too, which
// memcached keeps no item across: it restarts empty in its container, as
// the status says beforehand and an event after. A memory limit larger
// than the pod's memory volume, and another change (the port, TLS, resources
// where the cluster cannot resize the pod) replace the pod: the operator
// deletes it, the StatefulSet controller makes it anew from the template,
// and its cache starts empty, which an event says. Pods that are
// not ready are brought to the template first, all at once: they serve
// nothing, and a change that mends them (a rollback of an image that
// cannot start) must not wait for them.

// Event reasons of the operator's rollout.
const (
	eventRestartingInPlace = "RestartingInPlace"
	eventRestartedWarm     = "RestartedWarm"
	eventRestartedEmpty    = "RestartedEmpty"
	eventReplacingPod      = "ReplacingPod"
	eventResizingInPlace   = "ResizingInPlace"
)

// logLimitBytes is how much of the start of a memcached container's log is
// read for the runner's word on the restore: its lines come first, before
// memcached's own (all of them at -vv).
const logLimitBytes = 64 << 10

// noContainer is desired.AnnotationRestartingFrom of a pod restarted in
// place while no memcached container ran in it.
const noContainer = "none"

// settingsPoll is how often the log of a memcached restarting in its
// container for new settings is read: no event of the pod tells that it
// did.
const settingsPoll = 2 * time.Second

// PodLogs reads the log of a container's current run.
type PodLogs interface {
	Read(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) ([]byte, error)
}

// ClientsetLogs reads logs through the apiserver (pods/log).
type ClientsetLogs struct{ Clientset kubernetes.Interface }

// Read implements PodLogs.
func (l ClientsetLogs) Read(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) ([]byte, error) {
	return l.Clientset.CoreV1().Pods(namespace).GetLogs(pod, opts).DoRaw(ctx)
}

// reconcileRollout is the rollout's phase: one step of bringing the pods
// of a StatefulSet the operator rolls to its update revision. While the
// StatefulSet replaces a Deployment, which serves meanwhile, only its pods
// that are not ready are: the Deployment goes once every slot is ready,
// which a slot that cannot start on an outdated template (one held by a
// node selector no node matched, say) would never be.
func reconcileRollout(ctx context.Context, s *scope) (ctrl.Result, error) {
	set, want := s.obs.StatefulSet, s.desiredSet
	if set == nil || want == nil || !set.OnDelete {
		return ctrl.Result{}, nil
	}
	st := set.Status
	if st.ObservedGeneration < set.Generation || st.UpdateRevision == "" {
		// Its controller's next status is an event.
		return ctrl.Result{}, nil
	}
	replicas := desired.Replicas(s.m)
	pods, err := s.confirmAndSortPods(ctx, st.UpdateRevision, want)
	if err != nil {
		return ctrl.Result{}, err
	}
	slots, outdated, notReadyOutdated, waiting, result := pods.slots, pods.outdated, pods.notReadyOutdated, pods.waiting, pods.result
	toChange := append(slices.Clone(outdated), notReadyOutdated...)
	s.obs.Rolling, s.obs.RollingEmpties = rollingNote(toChange, want, waiting, s.handsOff())
	// Pods that serve nothing first, all at once.
	for _, p := range notReadyOutdated {
		if err := s.bringToTemplate(ctx, p, st.UpdateRevision, want); err != nil {
			return ctrl.Result{}, err
		}
	}
	if len(notReadyOutdated) > 0 || len(outdated) == 0 || s.replacing {
		return s.requeueIfPatchLetGo(result), nil
	}
	if waiting != "" || int32(len(slots)) < replicas {
		// The pods' next news is an event (or the log of a restart for
		// new settings, read again after result).
		return result, nil
	}
	last := slices.MaxFunc(outdated, func(a, b *owned.Pod) int {
		i, _ := ordinal(a.Name, s.m.Name)
		j, _ := ordinal(b.Name, s.m.Name)
		return int(i - j)
	})
	if s.handsOff() && costly(last, want) {
		k, _ := ordinal(last.Name, s.m.Name)
		host := desired.SlotHost(s.m.Name, s.m.Namespace, int(k))
		may, done, err := s.handOffState(ctx, host)
		if err != nil || !may {
			// The slot handed off before comes back first, in a move of
			// its own: its end, the ConfigMap's change, is an event.
			return result, err
		}
		s.handOff = host
		if !done {
			// The membership's phase moves its keys: the move's end, the
			// ConfigMap's change, is an event.
			return result, nil
		}
	}
	err = s.bringToTemplate(ctx, last, st.UpdateRevision, want)
	return s.requeueIfPatchLetGo(ctrl.Result{}), err
}

// requeueIfPatchLetGo is result, or a look again after settingsPoll when a
// pod's patch was let go because its test failed: the pod's next event
// would bring the store up to date, but a patch let go is not to depend on
// one coming (none does when the pod does not change again, or when the
// event was missed).
func (s *scope) requeueIfPatchLetGo(result ctrl.Result) ctrl.Result {
	if !s.podPatchLetGo {
		return result
	}
	return sooner(result, ctrl.Result{RequeueAfter: settingsPoll})
}

// rollingNote says, for the status, how the pods still to change take
// want's template, and what the next of them waits for; and whether any
// of them restarts memcached empty or is replaced, losing its cache (not
// where each hands its keys to the other slots first: handsOff).
func rollingNote(outdated []*owned.Pod, want *appsv1ac.StatefulSetApplyConfiguration, waiting string, handsOff bool) (string, bool) {
	inPlace, empty, replaced := 0, 0, 0
	var emptiedBy []string
	for _, p := range outdated {
		switch c := owned.Costliest(owned.Changes(p, want.Spec.Template)); c.Cost {
		case owned.Replacement:
			replaced++
		case owned.EmptyRestart:
			empty++
			if !slices.Contains(emptiedBy, c.Why) {
				emptiedBy = append(emptiedBy, c.Why)
			}
		default:
			inPlace++
		}
	}
	var notes []string
	if inPlace > 0 {
		notes = append(notes, fmt.Sprintf("%d pods to change in place (memcached restarts warm where its image or settings change)", inPlace))
	}
	if empty > 0 && handsOff {
		notes = append(notes, fmt.Sprintf("%d pods to change in place with memcached restarting empty (%s changes, which it keeps no item across), each handing its keys to the other slots first", empty, strings.Join(emptiedBy, ", or ")))
	} else if empty > 0 {
		notes = append(notes, fmt.Sprintf("%d pods to change in place with memcached restarting empty: %s changes, which it keeps no item across", empty, strings.Join(emptiedBy, ", or ")))
	}
	if replaced > 0 && handsOff {
		notes = append(notes, fmt.Sprintf("%d pods to replace, each handing its keys to the other slots first: %s", replaced, owned.ShapeChangedMessage))
	} else if replaced > 0 {
		notes = append(notes, fmt.Sprintf("%d pods to replace, each starting with an empty cache: %s", replaced, owned.ShapeChangedMessage))
	}
	if waiting != "" {
		notes = append(notes, waiting)
	}
	return strings.Join(notes, "; "), !handsOff && empty+replaced > 0
}

// ordinal is the slot of the pod name of the StatefulSet set.
func ordinal(name, set string) (int32, bool) {
	rest, ok := strings.CutPrefix(name, set+"-")
	if !ok {
		return 0, false
	}
	k, err := strconv.ParseInt(rest, 10, 32)
	return int32(k), err == nil
}

// bringToTemplate brings p to revision, want's template: in place when p
// has its shape, by replacing p otherwise.
func (s *scope) bringToTemplate(ctx context.Context, p *owned.Pod, revision string, want *appsv1ac.StatefulSetApplyConfiguration) error {
	step := inPlaceStep(p, revision, want, time.Now())
	if step.kind != replace && step.resize != nil {
		why, err := s.resizePod(ctx, p, step)
		if err != nil {
			return err
		}
		if why != "" {
			return s.replacePod(ctx, p, why)
		}
	}
	switch step.kind {
	case replace:
		return s.replacePod(ctx, p, step.why)
	case noRestart:
		ctrl.LoggerFrom(ctx).Info("Bringing a pod to the template in place", "pod", p.Name, "revision", revision)
		_, err := s.patchPod(ctx, p, step.ops)
		return err
	}
	sent, err := s.patchPod(ctx, p, step.ops)
	if sent {
		ctrl.LoggerFrom(ctx).Info("Restarting memcached in place", "pod", p.Name, "revision", revision, "with", step.with)
		s.podEvent(p, corev1.EventTypeNormal, eventRestartingInPlace, "Restart",
			"Pod %s: memcached restarts in place %s, saving its cache to restore it", p.Name, step.with)
	}
	return err
}

// restarted tells whether memcached restarted in p since the operator
// changed its image, and serves: the pod is ready on another memcached
// container, of want's image.
func restarted(p *owned.Pod, want *appsv1ac.StatefulSetApplyConfiguration) bool {
	if !p.Ready || p.MemcachedID == "" || p.MemcachedID == p.RestartingFrom {
		return false
	}
	images := owned.TemplateImages(want.Spec.Template)
	for _, c := range p.Images {
		if c.Name == desired.ContainerName && !c.Init {
			return images[c.Key()] == c.Image
		}
	}
	return false
}
