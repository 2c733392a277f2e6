package owned

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/settings"
)

// Cost is what bringing a pod's field to its template costs the pod's
// memcached, from least to most.
type Cost int

const (
	// Free: patched in place (or resized in place); memcached goes on.
	Free Cost = iota
	// WarmRestart: memcached restarts in its container and restores its
	// items from its memory file.
	WarmRestart
	// EmptyRestart: memcached restarts in its container, with no item.
	EmptyRestart
	// Replacement: the pod is deleted and made anew; its cache starts
	// empty.
	Replacement
)

func (c Cost) String() string {
	return [...]string{"nothing", "a warm restart", "an empty restart", "a replacement"}[c]
}

// PodField is one of the fields the operator sets on a Memcached's pods:
// how the summary reads it off a running pod, how a rollout changes it in
// place, and what a change costs. The summary (SummarizePod), the rollout
// (pkg/controller/memcached's inPlaceStep) and the status's note on a
// rollout (rollingNote) read PodFields; docs/architecture.md shows it.
type PodField struct {
	Name string
	// InShape: the field is part of the digest of
	// desired.AnnotationPodShape; any change of it replaces the pod.
	InShape bool
	// ReadAs names the fields of Pod it is read into.
	ReadAs string
	// Read copies it off a running pod (pod) into its summary; nil where
	// another row reads the same. ReadWhileDeleting: it is read off a pod
	// being deleted too (whose containers' changes say nothing).
	Read              func(pod *corev1.Pod, s *Pod)
	ReadWhileDeleting bool
	// Patch says how a rollout changes it in place.
	Patch string
	// Diff tells whether p's field differs from template's, and if so
	// what bringing it there costs and, for a restart or a replacement,
	// why; nil: changing it is Free.
	Diff func(p *Pod, template *corev1ac.PodTemplateSpecApplyConfiguration) (changed bool, cost Cost, why string)
}

// The names of PodFields.
const (
	FieldShape          = "the pod's shape"
	FieldMemoryVolume   = "memcached's memory volume"
	FieldResources      = "memcached's CPU and memory"
	FieldContainers     = "the containers"
	FieldMemcachedImage = "memcached's image"
	FieldOtherImages    = "the other containers' images"
	FieldSettings       = "memcached's settings"
	FieldMetadata       = "labels and annotations"
	FieldRevision       = "the revision label"
	FieldToldContent    = "what the pod is told"
	// ShapeChangedMessage is why a pod whose shape changed is replaced.
	ShapeChangedMessage = "the change is more than images, labels, annotations, settings memcached takes in its container, a memory limit its memory volume holds and resources"
)

// PodFields are the fields the operator sets on a pod, in the order a
// rollout weighs them: the first change that replaces the pod says why.
var PodFields = []PodField{
	{Name: FieldShape, InShape: true, ReadAs: "Shape",
		Read:              func(pod *corev1.Pod, s *Pod) { s.Shape = pod.Annotations[desired.AnnotationPodShape] },
		ReadWhileDeleting: true,
		Patch:             "none: everything of the template but the rows below (ports, TLS and authentication settings, volumes, probes, scheduling, the command line)",
		Diff:              diffShape},
	{Name: FieldMemoryVolume, ReadAs: "MemoryVolume", Read: readMemoryVolume,
		Patch: "none: a pod's volumes cannot grow", Diff: diffMemoryVolume},
	{Name: FieldResources, ReadAs: "Resources, Resized, Resizing, ResizeFailed", Read: readResources,
		Patch: "pods/resize (Kubernetes 1.33 and later)", Diff: diffResources},
	{Name: FieldContainers, ReadAs: "Images", Read: readImages,
		Patch: "none: a container the template lacks is another's", Diff: diffContainers},
	{Name: FieldMemcachedImage, ReadAs: "Images, MemcachedID",
		Patch: "JSON patch of its image; the kubelet restarts the container, the warm runner restores the cache", Diff: diffMemcachedImage},
	{Name: FieldOtherImages, ReadAs: "Images",
		Patch: "JSON patch of their images; the kubelet restarts those containers only", Diff: diffOtherImages},
	{Name: FieldSettings, ReadAs: "Annotations[" + desired.AnnotationMemcachedSettings + "]", ReadWhileDeleting: true,
		Patch: "JSON patch of the annotation; the warm runner restarts memcached in its container", Diff: diffSettings},
	{Name: FieldMetadata, ReadAs: "Labels, Annotations", Read: readMetadata, ReadWhileDeleting: true,
		Patch: "JSON patch of the template's, and removal of those its last template set"},
	{Name: FieldRevision, ReadAs: "Revision, RestartingFrom", Read: readRevision, ReadWhileDeleting: true,
		Patch: "JSON patch of the controller-revision-hash label"},
	{Name: FieldToldContent, ReadAs: "MembershipVersion, MembershipSeal, MembershipRetold, SecretsDigest", Read: readTold, ReadWhileDeleting: true,
		Patch: "merge patch of the annotations (the pods phase), which has the kubelet write the mounted content at once"},
}

// Change is a field of a pod that differs from its template's.
type Change struct {
	Field string
	Cost  Cost
	Why   string
}

// Changes are the fields of p that differ from template's, in the order
// of PodFields.
func Changes(p *Pod, template *corev1ac.PodTemplateSpecApplyConfiguration) []Change {
	var out []Change
	for _, f := range PodFields {
		if f.Diff == nil {
			continue
		}
		if changed, cost, why := f.Diff(p, template); changed {
			out = append(out, Change{Field: f.Name, Cost: cost, Why: why})
		}
	}
	return out
}

// Costliest is the first of changes that costs the most; a Free change
// of no field when there is none.
func Costliest(changes []Change) Change {
	var c Change
	for _, ch := range changes {
		if ch.Cost > c.Cost {
			c = ch
		}
	}
	return c
}

// Changed tells whether changes hold a change of field.
func Changed(changes []Change, field string) bool {
	for _, c := range changes {
		if c.Field == field {
			return true
		}
	}
	return false
}

func diffShape(p *Pod, t *corev1ac.PodTemplateSpecApplyConfiguration) (bool, Cost, string) {
	changed := p.Shape == "" || p.Shape != t.Annotations[desired.AnnotationPodShape]
	return changed, Replacement, ShapeChangedMessage
}

// diffMemoryVolume: p's memory volume must hold the memory limit of
// template, which is as large as its memory volume.
func diffMemoryVolume(p *Pod, t *corev1ac.PodTemplateSpecApplyConfiguration) (bool, Cost, string) {
	size := desired.MemoryVolumeSize(t)
	if size == nil || (p.MemoryVolume != nil && p.MemoryVolume.Cmp(*size) >= 0) {
		return false, Free, ""
	}
	return true, Replacement, fmt.Sprintf("memcached's new memory limit needs a memory volume of %s, and the pod's is %s: a pod's volumes cannot grow", size, p.MemoryVolume)
}

func diffResources(p *Pod, t *corev1ac.PodTemplateSpecApplyConfiguration) (bool, Cost, string) {
	if !runsMemcached(p) {
		return false, Free, ""
	}
	want := TemplateResources(t)
	if removesResources(p.Resources, want) {
		return true, Replacement, "a resource other than CPU and memory changes, or one is left out: no resize in place can"
	}
	return !SameCPUAndMemory(p.Resources, want), Free, ""
}

func diffContainers(p *Pod, t *corev1ac.PodTemplateSpecApplyConfiguration) (bool, Cost, string) {
	images := TemplateImages(t)
	for _, c := range p.Images {
		if _, ok := images[c.Key()]; !ok {
			return true, Replacement, fmt.Sprintf("container %s is not the template's", c.Name)
		}
	}
	return false, Free, ""
}

func diffMemcachedImage(p *Pod, t *corev1ac.PodTemplateSpecApplyConfiguration) (bool, Cost, string) {
	images := TemplateImages(t)
	for _, c := range p.Images {
		if c.Name != desired.ContainerName || c.Init || images[c.Key()] == c.Image {
			continue
		}
		if p.Ready && p.MemcachedID == "" {
			// No kubelet says a pod is ready with no container ID: a node
			// that runs no containers (a virtual kubelet), which would
			// never restart one for its new image.
			return true, Replacement, "the pod is ready but names no memcached container, so no restart of it for its new image can be seen"
		}
		return true, WarmRestart, "with image " + images[c.Key()]
	}
	return false, Free, ""
}

func diffOtherImages(p *Pod, t *corev1ac.PodTemplateSpecApplyConfiguration) (bool, Cost, string) {
	images := TemplateImages(t)
	for _, c := range p.Images {
		if image, ok := images[c.Key()]; ok && image != c.Image && (c.Name != desired.ContainerName || c.Init) {
			return true, Free, ""
		}
	}
	return false, Free, ""
}

// diffSettings: memcached restarts in its container to take new
// settings, warm but where they change what its memory file keeps
// (desired.NotKept).
func diffSettings(p *Pod, t *corev1ac.PodTemplateSpecApplyConfiguration) (bool, Cost, string) {
	want, ok := t.Annotations[desired.AnnotationMemcachedSettings]
	have := p.Annotations[desired.AnnotationMemcachedSettings]
	if !ok || want == have {
		return false, Free, ""
	}
	wantFlags, _ := settings.Parse(want)
	haveFlags, _ := settings.Parse(have)
	if by := desired.NotKept(haveFlags, wantFlags); by != "" {
		return true, EmptyRestart, by
	}
	return true, WarmRestart, "with settings " + strings.Join(wantFlags, " ")
}
