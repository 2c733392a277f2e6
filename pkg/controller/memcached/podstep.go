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

// inPlaceStep is how to bring p to revision, want's template, at now: what
// its changes cost (owned.Changes) decides. A replacement, when any change
// costs one; else a JSON patch of its images, labels, annotations
// (memcached's settings among them) and revision label, with
// desired.AnnotationRestartingFrom where memcached restarts, and a resize
// in place where its CPU or memory change.
func inPlaceStep(p *owned.Pod, revision string, want *appsv1ac.StatefulSetApplyConfiguration, now time.Time) step {
	changes := owned.Changes(p, want.Spec.Template)
	if c := owned.Costliest(changes); c.Cost == owned.Replacement {
		return step{kind: replace, why: c.Why}
	}
	ops := imageOps(p, want, revision)
	ops = append(ops, metadataOps(p, want)...)
	var r *resize
	if owned.Changed(changes, owned.FieldResources) {
		r = &resize{index: containerIndex(p, desired.ContainerName), resources: owned.TemplateResources(want.Spec.Template)}
	}
	restarting := func(from string) map[string]any {
		return map[string]any{"op": "add", "path": "/metadata/annotations/" + jsonPointerEscape(desired.AnnotationRestartingFrom), "value": from}
	}
	switch {
	case owned.Changed(changes, owned.FieldMemcachedImage):
		// With new settings too: the next container reads them at start.
		from := p.MemcachedID
		if from == "" {
			from = noContainer // none runs: an image that could not start
		}
		return step{kind: restartContainer, ops: append(ops, restarting(from)), resize: r,
			with: "with image " + owned.TemplateImages(want.Spec.Template)[owned.ContainerImage{Name: desired.ContainerName}.Key()]}
	case owned.Changed(changes, owned.FieldSettings) && p.MemcachedID != "":
		// The kubelet writes the annotation to the runner's settings file,
		// and the runner restarts memcached in its container.
		since := desired.RestartingForSettings + now.UTC().Format(time.RFC3339)
		settings := want.Spec.Template.Annotations[desired.AnnotationMemcachedSettings]
		return step{kind: restartForSettings, ops: append(ops, restarting(since)), resize: r, with: "with settings " + settingsText(settings)}
	}
	// A memcached not running takes new settings when it starts.
	return step{kind: noRestart, ops: ops, resize: r}
}

// imageOps are the JSON patch operations that bring p's images and
// revision label to want's template, testing first that p is the pod the
// store holds: a patch sent already, whose pod the store has not caught up
// with, is not sent twice.
func imageOps(p *owned.Pod, want *appsv1ac.StatefulSetApplyConfiguration, revision string) []map[string]any {
	images := owned.TemplateImages(want.Spec.Template)
	revisionLabel := "/metadata/labels/" + jsonPointerEscape(appsv1.ControllerRevisionHashLabelKey)
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": p.UID},
		{"op": "test", "path": revisionLabel, "value": p.Revision},
	}
	for i, c := range p.Images {
		image := images[c.Key()]
		if image == c.Image {
			continue
		}
		list := "containers"
		if c.Init {
			list = "initContainers"
		} else {
			i -= initContainers(p)
		}
		at := fmt.Sprintf("/spec/%s/%d", list, i)
		ops = append(ops,
			map[string]any{"op": "test", "path": at + "/name", "value": c.Name},
			map[string]any{"op": "replace", "path": at + "/image", "value": image})
	}
	return append(ops, map[string]any{"op": "replace", "path": revisionLabel, "value": revision})
}

// containerIndex is the index of p's container name among its containers
// (not its init containers).
func containerIndex(p *owned.Pod, name string) int {
	for i, c := range p.Images {
		if c.Name == name && !c.Init {
			return i - initContainers(p)
		}
	}
	return -1
}

// resizePod asks for p's memcached container to be resized in place
// (pods/resize), and says why it cannot be when the apiserver refuses:
// a cluster without the subresource (before 1.33), a node whose kubelet
// does not resize, a resize that would change the pod's QoS class or
// lower a memory limit where that is not allowed. Like every patch of a
// pod the operator sends, it is of p, not of a successor of p's name.
func (s *scope) resizePod(ctx context.Context, p *owned.Pod, st step) (string, error) {
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": p.UID},
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
	case failedTest(err):
		// Replaced meanwhile: its successor is made from the template.
		s.podPatchLetGo = true
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
	return p.Resizing != "" || (p.Resized != nil && !owned.SameCPUAndMemory(*p.Resized, p.Resources))
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

func initContainers(p *owned.Pod) int {
	n := 0
	for _, c := range p.Images {
		if c.Init {
			n++
		}
	}
	return n
}
