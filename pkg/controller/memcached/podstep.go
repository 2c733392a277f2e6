package memcached

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

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
