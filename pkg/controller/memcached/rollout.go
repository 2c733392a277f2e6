package memcached

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/podlog"
	"github.com/example/memcached-operator/pkg/settings"
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
// of a StatefulSet the operator rolls to its update revision.
func reconcileRollout(ctx context.Context, s *scope) (ctrl.Result, error) {
	set, want := s.obs.StatefulSet, s.desiredSet
	if set == nil || want == nil || !set.OnDelete || s.replacing {
		return ctrl.Result{}, nil
	}
	st := set.Status
	if st.ObservedGeneration < set.Generation || st.UpdateRevision == "" {
		// Its controller's next status is an event.
		return ctrl.Result{}, nil
	}
	replicas := desired.Replicas(s.m)
	var slots, outdated, notReadyOutdated []*owned.Pod
	waiting := ""
	var result ctrl.Result
	for _, p := range s.obs.Pods {
		k, ok := ordinal(p.Name, s.m.Name)
		if !ok || k >= replicas {
			continue // a removed slot's: its controller removes it
		}
		slots = append(slots, p)
		switch {
		case p.Deleting:
			waiting = fmt.Sprintf("pod %s is being replaced", p.Name)
		case p.Revision != st.UpdateRevision && !p.Ready:
			// A restart of it that does not get on (an image that cannot
			// start) is mended by the next change.
			notReadyOutdated = append(notReadyOutdated, p)
		case p.Revision != st.UpdateRevision:
			outdated = append(outdated, p)
			if p.RestartingFrom != "" {
				waiting = fmt.Sprintf("memcached is restarting in place in pod %s", p.Name)
			}
		case p.ResizeFailed:
			// The kubelet cannot make the resize: a new pod takes it.
			if err := s.replacePod(ctx, p, "the node cannot resize it in place: "+p.Resizing); err != nil {
				return ctrl.Result{}, err
			}
			waiting = fmt.Sprintf("pod %s is being replaced", p.Name)
		case resizing(p):
			waiting = fmt.Sprintf("pod %s resizes in place", p.Name)
		case strings.HasPrefix(p.RestartingFrom, desired.RestartingForSettings):
			done, err := s.confirmSettingsRestart(ctx, p, want)
			if err != nil {
				return ctrl.Result{}, err
			}
			if !done {
				waiting = fmt.Sprintf("memcached is restarting in place in pod %s for new settings", p.Name)
				result = ctrl.Result{RequeueAfter: settingsPoll}
			}
		case p.RestartingFrom != "":
			if !restarted(p, want) {
				waiting = fmt.Sprintf("memcached is restarting in place in pod %s", p.Name)
				continue
			}
			if err := s.confirmRestart(ctx, p, want); err != nil {
				return ctrl.Result{}, err
			}
		case !p.Ready:
			waiting = fmt.Sprintf("pod %s is not ready", p.Name)
		}
	}
	s.obs.Rolling = rollingNote(append(slices.Clone(outdated), notReadyOutdated...), want, waiting)
	// Pods that serve nothing first, all at once.
	for _, p := range notReadyOutdated {
		if err := s.bringToTemplate(ctx, p, st.UpdateRevision, want); err != nil {
			return ctrl.Result{}, err
		}
	}
	if len(notReadyOutdated) > 0 || len(outdated) == 0 {
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
	err := s.bringToTemplate(ctx, last, st.UpdateRevision, want)
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
// want's template, and what the next of them waits for.
func rollingNote(outdated []*owned.Pod, want *appsv1ac.StatefulSetApplyConfiguration, waiting string) string {
	shape := want.Spec.Template.Annotations[desired.AnnotationPodShape]
	settings := settingsOf(want.Spec.Template.Annotations[desired.AnnotationMemcachedSettings])
	inPlace, empty, replaced := 0, 0, 0
	var emptiedBy []string
	for _, p := range outdated {
		switch {
		case p.Shape == "" || p.Shape != shape || !fitsMemory(p, want):
			replaced++
		default:
			by := desired.NotKept(settingsOf(p.Annotations[desired.AnnotationMemcachedSettings]), settings)
			if by == "" {
				inPlace++
				continue
			}
			empty++
			if !slices.Contains(emptiedBy, by) {
				emptiedBy = append(emptiedBy, by)
			}
		}
	}
	var notes []string
	if inPlace > 0 {
		notes = append(notes, fmt.Sprintf("%d pods to change in place (memcached restarts warm where its image or settings change)", inPlace))
	}
	if empty > 0 {
		notes = append(notes, fmt.Sprintf("%d pods to change in place with memcached restarting empty: %s changes, which it keeps no item across", empty, strings.Join(emptiedBy, ", or ")))
	}
	if replaced > 0 {
		notes = append(notes, fmt.Sprintf("%d pods to replace, each starting with an empty cache: the change is more than images, labels, annotations, settings memcached takes in its container, a memory limit its memory volume holds and resources", replaced))
	}
	if waiting != "" {
		notes = append(notes, waiting)
	}
	return strings.Join(notes, "; ")
}

// fitsMemory tells whether p's memory volume holds the memory limit of
// want's template, which is as large as its memory volume: a pod's
// volumes cannot grow, so a larger memory limit needs a new pod.
func fitsMemory(p *owned.Pod, want *appsv1ac.StatefulSetApplyConfiguration) bool {
	size := desired.MemoryVolumeSize(want.Spec.Template)
	return size == nil || (p.MemoryVolume != nil && p.MemoryVolume.Cmp(*size) >= 0)
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

// stepKind is how a pod is brought to a template.
type stepKind int

const (
	// replace: the pod is deleted, for its controller to make anew.
	replace stepKind = iota
	// noRestart: the pod is patched, and memcached goes on as it runs.
	noRestart
	// restartContainer: memcached's image changes; the kubelet restarts
	// its container.
	restartContainer
	// restartForSettings: memcached's settings change; its runner
	// restarts it in its container.
	restartForSettings
)

// step is how to bring a pod to a template: kind, and for a patch, its
// operations and what memcached restarts with, and the resources to
// resize memcached's container to first, if they change.
type step struct {
	kind   stepKind
	ops    []map[string]any
	with   string
	resize *resize
	// why a pod of the template's shape is replaced all the same.
	why string
}

// resize is a resize in place of the container at index of a pod's
// containers to resources.
type resize struct {
	index     int
	resources corev1.ResourceRequirements
}

// inPlaceStep is how to bring p to revision, want's template, at now: a
// JSON patch of its images, labels, annotations (memcached's settings
// among them) and revision label when p has the template's shape, with
// desired.AnnotationRestartingFrom where memcached restarts; else a
// replacement.
func inPlaceStep(p *owned.Pod, revision string, want *appsv1ac.StatefulSetApplyConfiguration, now time.Time) step {
	shape := want.Spec.Template.Annotations[desired.AnnotationPodShape]
	if p.Shape == "" || p.Shape != shape {
		return step{kind: replace}
	}
	if !fitsMemory(p, want) {
		return step{kind: replace, why: fmt.Sprintf("memcached's new memory limit needs a memory volume of %s, and the pod's is %s: a pod's volumes cannot grow",
			desired.MemoryVolumeSize(want.Spec.Template), p.MemoryVolume)}
	}
	images := templateImages(want)
	revisionLabel := "/metadata/labels/" + jsonPointerEscape(appsv1.ControllerRevisionHashLabelKey)
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": p.UID},
		// As the store holds it: a patch sent already, whose pod the store
		// has not caught up with, is not sent twice.
		{"op": "test", "path": revisionLabel, "value": p.Revision},
	}
	restarts := false // memcached's container
	var r *resize
	for i, c := range p.Images {
		if c.Name == desired.ContainerName && !c.Init {
			want := templateResources(want)
			if removes(p.Resources, want) {
				// Which no resize can do.
				return step{kind: replace}
			}
			if !sameCPUAndMemory(p.Resources, want) {
				r = &resize{index: i - initContainers(p), resources: want}
			}
		}
		image, ok := images[c.Key()]
		if !ok {
			// Not the template's containers: another's change; replace.
			return step{kind: replace}
		}
		if image == c.Image {
			continue
		}
		list := "containers"
		if c.Init {
			list = "initContainers"
		} else {
			i -= initContainers(p)
			restarts = restarts || c.Name == desired.ContainerName
		}
		at := fmt.Sprintf("/spec/%s/%d", list, i)
		ops = append(ops,
			map[string]any{"op": "test", "path": at + "/name", "value": c.Name},
			map[string]any{"op": "replace", "path": at + "/image", "value": image})
	}
	ops = append(ops, map[string]any{"op": "replace", "path": revisionLabel, "value": revision})
	ops = append(ops, metadataOps(p, want)...)
	restarting := func(from string) map[string]any {
		return map[string]any{"op": "add", "path": "/metadata/annotations/" + jsonPointerEscape(desired.AnnotationRestartingFrom), "value": from}
	}
	settings, newSettings := want.Spec.Template.Annotations[desired.AnnotationMemcachedSettings]
	newSettings = newSettings && settings != p.Annotations[desired.AnnotationMemcachedSettings]
	switch {
	case restarts && p.Ready && p.MemcachedID == "":
		// No kubelet says a pod is ready with no container ID: a node
		// that runs no containers (a virtual kubelet), which would never
		// restart one for its new image.
		return step{kind: replace, why: "the pod is ready but names no memcached container, so no restart of it for its new image can be seen"}
	case restarts:
		// With new settings too: the next container reads them at start.
		from := p.MemcachedID
		if from == "" {
			from = noContainer // none runs: an image that could not start
		}
		return step{kind: restartContainer, ops: append(ops, restarting(from)), resize: r,
			with: "with image " + images[owned.ContainerImage{Name: desired.ContainerName}.Key()]}
	case newSettings && p.MemcachedID != "":
		// The kubelet writes the annotation to the runner's settings file,
		// and the runner restarts memcached warm in its container.
		since := desired.RestartingForSettings + now.UTC().Format(time.RFC3339)
		return step{kind: restartForSettings, ops: append(ops, restarting(since)), resize: r, with: "with settings " + settingsText(settings)}
	}
	// A memcached not running takes new settings when it starts.
	return step{kind: noRestart, ops: ops, resize: r}
}

// resizePod asks for p's memcached container to be resized in place
// (pods/resize), and says why it cannot be when the apiserver refuses:
// a cluster without the subresource (before 1.33), a node whose kubelet
// does not resize, a resize that would change the pod's QoS class or
// lower a memory limit where that is not allowed.
func (s *scope) resizePod(ctx context.Context, p *owned.Pod, st step) (string, error) {
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": fmt.Sprintf("/spec/containers/%d/name", st.resize.index), "value": desired.ContainerName},
		{"op": "add", "path": fmt.Sprintf("/spec/containers/%d/resources", st.resize.index), "value": st.resize.resources},
	})
	if err != nil {
		return "", err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	err = s.Client.SubResource("resize").Patch(ctx, pod, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(owned.FieldManager))
	switch {
	case err == nil:
		ctrl.LoggerFrom(ctx).Info("Resizing memcached's container in place", "pod", p.Name)
		s.podEvent(p, corev1.EventTypeNormal, eventResizingInPlace, "Resize",
			"Pod %s: memcached's container is resized in place, with no restart", p.Name)
		return "", nil
	case apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err) || apierrors.IsBadRequest(err):
		return "the cluster cannot resize it in place: " + err.Error(), nil
	}
	return "", fmt.Errorf("resizing pod %s: %w", p.Name, err)
}

// resizing tells whether the kubelet has yet to make a resize in place of
// p's memcached container: a resize condition, or other resources than
// the spec's where it says which it runs with.
func resizing(p *owned.Pod) bool {
	return p.Resizing != "" || (p.Resized != nil && !sameCPUAndMemory(*p.Resized, p.Resources))
}

// templateResources are the resources of want's memcached container, as
// the apiserver defaults them on a pod: a limit without a request is the
// request too.
func templateResources(want *appsv1ac.StatefulSetApplyConfiguration) corev1.ResourceRequirements {
	var r corev1.ResourceRequirements
	for _, c := range want.Spec.Template.Spec.Containers {
		if c.Name == nil || *c.Name != desired.ContainerName || c.Resources == nil {
			continue
		}
		if c.Resources.Limits != nil {
			r.Limits = maps.Clone(*c.Resources.Limits)
		}
		if c.Resources.Requests != nil {
			r.Requests = maps.Clone(*c.Resources.Requests)
		}
	}
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Requests[name] = q
		}
	}
	return r
}

// sameCPUAndMemory tells whether a and b ask for the same CPU and memory,
// which is what a resize in place changes.
func sameCPUAndMemory(a, b corev1.ResourceRequirements) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		for _, l := range [][2]corev1.ResourceList{{a.Requests, b.Requests}, {a.Limits, b.Limits}} {
			x, inX := l[0][name]
			y, inY := l[1][name]
			if inX != inY || (inX && x.Cmp(y) != 0) {
				return false
			}
		}
	}
	return true
}

// removes tells whether want leaves out a request or limit that have
// sets, or changes another resource than CPU and memory: no resize in
// place can.
func removes(have, want corev1.ResourceRequirements) bool {
	for _, l := range [][2]corev1.ResourceList{{have.Requests, want.Requests}, {have.Limits, want.Limits}} {
		for name, q := range l[0] {
			w, ok := l[1][name]
			if !ok {
				return true
			}
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory && q.Cmp(w) != 0 {
				return true
			}
		}
		for name := range l[1] {
			if _, ok := l[0][name]; !ok && name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				return true
			}
		}
	}
	return false
}

// replacePod deletes p, which its StatefulSet's controller makes anew from
// the template: its cache starts empty.
func (s *scope) replacePod(ctx context.Context, p *owned.Pod, why string) error {
	if why == "" {
		why = "the change is more than images, labels, annotations, settings memcached keeps and resources, which needs a new pod"
	}
	ctrl.LoggerFrom(ctx).Info("Replacing a pod", "pod", p.Name, "why", why)
	uid := p.UID
	err := s.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}, client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s: %w", p.Name, err)
	}
	s.podEvent(p, corev1.EventTypeNormal, eventReplacingPod, "Replace",
		"Pod %s is replaced: %s; its cache starts empty", p.Name, why)
	return nil
}

// metadataOps are the JSON patch operations that give p the labels and
// annotations of want's template: those the template sets, and the removal
// of the pod labels and annotations p's own template set (its
// desired.AnnotationPodMetadataKeys) and want's no longer does. The
// others' labels and annotations stay.
func metadataOps(p *owned.Pod, want *appsv1ac.StatefulSetApplyConfiguration) []map[string]any {
	var ops []map[string]any
	set := func(kind string, have, template map[string]string, was []string) {
		for _, k := range slices.Sorted(maps.Keys(template)) {
			if v, ok := have[k]; !ok || v != template[k] {
				ops = append(ops, map[string]any{"op": "add", "path": "/metadata/" + kind + "/" + jsonPointerEscape(k), "value": template[k]})
			}
		}
		for _, k := range was {
			if _, kept := template[k]; !kept {
				if _, ok := have[k]; ok {
					ops = append(ops, map[string]any{"op": "remove", "path": "/metadata/" + kind + "/" + jsonPointerEscape(k)})
				}
			}
		}
	}
	was := desired.ParsePodMetadataKeys(p.Annotations[desired.AnnotationPodMetadataKeys])
	set("labels", p.Labels, want.Spec.Template.Labels, was.Labels)
	set("annotations", p.Annotations, want.Spec.Template.Annotations, was.Annotations)
	return ops
}

// restarted tells whether memcached restarted in p since the operator
// changed its image, and serves: the pod is ready on another memcached
// container, of want's image.
func restarted(p *owned.Pod, want *appsv1ac.StatefulSetApplyConfiguration) bool {
	if !p.Ready || p.MemcachedID == "" || p.MemcachedID == p.RestartingFrom {
		return false
	}
	images := templateImages(want)
	for _, c := range p.Images {
		if c.Name == desired.ContainerName && !c.Init {
			return images[c.Key()] == c.Image
		}
	}
	return false
}

// confirmRestart reads what the warm runner of p's restarted memcached
// said of its cache, and tells it: on the pod (desired.AnnotationWarmRestart,
// which ends the restart) and in an event.
func (s *scope) confirmRestart(ctx context.Context, p *owned.Pod, want *appsv1ac.StatefulSetApplyConfiguration) error {
	limit := int64(logLimitBytes)
	log, err := s.Logs.Read(ctx, p.Namespace, p.Name, &corev1.PodLogOptions{Container: desired.ContainerName, LimitBytes: &limit})
	if err != nil {
		return fmt.Errorf("reading the log of pod %s's memcached: %w", p.Name, err)
	}
	said, _ := podlog.FirstStart(log, nil)
	image := templateImages(want)[owned.ContainerImage{Name: desired.ContainerName}.Key()]
	ctrl.LoggerFrom(ctx).Info("memcached restarted in place", "pod", p.Name, "restored", said.IsRestore(), "items", said.Items)
	return s.endRestart(ctx, p, said, "with image "+image)
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

// templateImages are the images of want's pod template, by container.
func templateImages(want *appsv1ac.StatefulSetApplyConfiguration) map[string]string {
	spec := want.Spec.Template.Spec
	images := map[string]string{}
	for _, c := range spec.InitContainers {
		images[owned.ContainerImage{Name: *c.Name, Init: true}.Key()] = *c.Image
	}
	for _, c := range spec.Containers {
		images[owned.ContainerImage{Name: *c.Name}.Key()] = *c.Image
	}
	return images
}

func initContainers(p *owned.Pod) int {
	n := 0
	for _, c := range p.Images {
		if c.Init {
			n++
		}
	}
	return n
}

// jsonPointerEscape escapes a map key for a JSON pointer (RFC 6901).
func jsonPointerEscape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}
