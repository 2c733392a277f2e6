package memcached

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

// The operator reads the settings of a pod's annotation as the warm runner
// does, and says them on one line.
func TestSettingsText(t *testing.T) {
	g := NewWithT(t)
	g.Expect(settingsText("")).To(Equal("(memcached's defaults)"))
	g.Expect(settingsText("-v\n--threads=4")).To(Equal("-v --threads=4"))
}

func TestOrdinal(t *testing.T) {
	g := NewWithT(t)
	for name, want := range map[string]int32{"cache-0": 0, "cache-12": 12} {
		k, ok := ordinal(name, "cache")
		g.Expect(ok).To(BeTrue(), name)
		g.Expect(k).To(Equal(want), name)
	}
	for _, name := range []string{"cache-x", "other-1", "cache-a-1", "cache"} {
		_, ok := ordinal(name, "cache")
		g.Expect(ok).To(BeFalse(), name)
	}
}

// A pod takes the template's labels and annotations in place: those the
// template sets, less the pod labels and annotations its own template set
// that the new one does not; what others put on the pod stays.
func TestMetadataOps(t *testing.T) {
	was := desired.PodMetadataKeys{Labels: []string{"team", "tier"}, Annotations: []string{"example.com/a"}}.String()
	p := &owned.Pod{
		Labels: map[string]string{"team": "a", "tier": "cache", "someone.example.com/x": "y", "controller-revision-hash": "r1"},
		Annotations: map[string]string{
			"example.com/a": "1", "kubectl.kubernetes.io/restartedAt": "t",
			desired.AnnotationPodMetadataKeys: was, desired.AnnotationPodShape: "s",
		},
	}
	now := desired.PodMetadataKeys{Labels: []string{"team"}, Annotations: []string{"example.com/b"}}.String()
	want := appsv1ac.StatefulSet("cache", "ns").WithSpec(appsv1ac.StatefulSetSpec().WithTemplate(corev1ac.PodTemplateSpec().
		WithLabels(map[string]string{"team": "b"}).
		WithAnnotations(map[string]string{"example.com/b": "2", desired.AnnotationPodMetadataKeys: now, desired.AnnotationPodShape: "s"})))
	NewWithT(t).Expect(metadataOps(p, want)).To(Equal([]map[string]any{
		{"op": "add", "path": "/metadata/labels/team", "value": "b"},
		{"op": "remove", "path": "/metadata/labels/tier"},
		{"op": "add", "path": "/metadata/annotations/cache.example.com~1pod-metadata-keys", "value": now},
		{"op": "add", "path": "/metadata/annotations/example.com~1b", "value": "2"},
		{"op": "remove", "path": "/metadata/annotations/example.com~1a"},
	}))
}

// The status says how the pods still to change take the template.
func TestRollingNote(t *testing.T) {
	want := appsv1ac.StatefulSet("cache", "ns").WithSpec(appsv1ac.StatefulSetSpec().WithTemplate(corev1ac.PodTemplateSpec().
		WithAnnotations(map[string]string{desired.AnnotationPodShape: "s2"})))
	same, other, none := &owned.Pod{Shape: "s2"}, &owned.Pod{Shape: "s1"}, &owned.Pod{}
	g := NewWithT(t)
	// The note, and whether it says caches are lost (which the status
	// writes at once).
	note := func(pods []*owned.Pod, want *appsv1ac.StatefulSetApplyConfiguration, waiting string, empties bool) string {
		t.Helper()
		n, e := rollingNote(pods, want, waiting, false)
		g.Expect(e).To(Equal(empties), "caches emptied: %s", n)
		return n
	}
	g.Expect(note([]*owned.Pod{same, same}, want, "", false)).To(Equal("2 pods to change in place (memcached restarts warm where its image or settings change)"))
	g.Expect(note([]*owned.Pod{other, none}, want, "pod cache-2 is not ready", true)).To(Equal(
		"2 pods to replace, each starting with an empty cache: the change is more than images, labels, annotations, settings memcached takes in its container, a memory limit its memory volume holds and resources; pod cache-2 is not ready"))
	g.Expect(note(nil, want, "", false)).To(BeEmpty())
	handed, empties := rollingNote([]*owned.Pod{other}, want, "", true)
	g.Expect(empties).To(BeFalse(), "a pod that hands its keys over first loses none")
	g.Expect(handed).To(HavePrefix("1 pods to replace, each handing its keys to the other slots first: "))

	bigger := appsv1ac.StatefulSet("cache", "ns").WithSpec(appsv1ac.StatefulSetSpec().WithTemplate(corev1ac.PodTemplateSpec().
		WithAnnotations(map[string]string{desired.AnnotationPodShape: "s2", desired.AnnotationMemcachedSettings: "--threads=2\n--max-item-size=2097152"})))
	was := &owned.Pod{Shape: "s2", Annotations: map[string]string{desired.AnnotationMemcachedSettings: "--threads=4"}}
	g.Expect(note([]*owned.Pod{was}, bigger, "", true)).To(Equal(
		"1 pods to change in place with memcached restarting empty: its maximum item size changes, which it keeps no item across"))

	memory := appsv1ac.StatefulSet("cache", "ns").WithSpec(appsv1ac.StatefulSetSpec().WithTemplate(corev1ac.PodTemplateSpec().
		WithAnnotations(map[string]string{desired.AnnotationPodShape: "s2", desired.AnnotationMemcachedSettings: "--memory-limit=48\n--threads=4"}).
		WithSpec(corev1ac.PodSpec().WithVolumes(corev1ac.Volume().WithName(desired.MemoryVolumeName).
			WithEmptyDir(corev1ac.EmptyDirVolumeSource().WithSizeLimit(resource.MustParse("49Mi")))))))
	small, large := *was, *was
	small.MemoryVolume, large.MemoryVolume = ptr.To(resource.MustParse("33Mi")), ptr.To(resource.MustParse("65Mi"))
	g.Expect(note([]*owned.Pod{&large, &small}, memory, "", true)).To(Equal(
		"1 pods to change in place with memcached restarting empty: its memory limit changes, which it keeps no item across; " +
			"1 pods to replace, each starting with an empty cache: the change is more than images, labels, annotations, settings memcached takes in its container, a memory limit its memory volume holds and resources"))
}

// inPlaceNow is when the in-place steps of the tests are taken.
var inPlaceNow = time.Date(2026, 12, 4, 10, 20, 30, 500, time.UTC)

// inPlaceTemplate is a StatefulSet whose pods run image with settings.
func inPlaceTemplate(image, settings string) *appsv1ac.StatefulSetApplyConfiguration {
	return appsv1ac.StatefulSet("cache", "ns").WithSpec(appsv1ac.StatefulSetSpec().WithTemplate(corev1ac.PodTemplateSpec().
		WithAnnotations(map[string]string{desired.AnnotationPodShape: "s", desired.AnnotationMemcachedSettings: settings}).
		WithSpec(corev1ac.PodSpec().
			WithInitContainers(corev1ac.Container().WithName(desired.WarmInstallContainerName).WithImage("operator:1")).
			WithContainers(corev1ac.Container().WithName(desired.ContainerName).WithImage(image)))))
}

// inPlacePod is a pod of revision r1 of inPlaceTemplate("memcached:1",
// "--threads=4"), its memcached container memcachedID.
func inPlacePod(memcachedID string) *owned.Pod {
	return &owned.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "cache-1", UID: "u1"},
		Revision:   "r1", Shape: "s", MemcachedID: memcachedID,
		Labels:      map[string]string{"controller-revision-hash": "r1"},
		Annotations: map[string]string{desired.AnnotationPodShape: "s", desired.AnnotationMemcachedSettings: "--threads=4"},
		Images: []owned.ContainerImage{
			{Name: desired.WarmInstallContainerName, Image: "operator:1", Init: true},
			{Name: desired.ContainerName, Image: "memcached:1"},
		},
	}
}

// restartingFrom is the restart marker step sets, or nil.
func restartingFrom(s step) any {
	for _, op := range s.ops {
		if op["path"] == "/metadata/annotations/cache.example.com~1restarting-from" {
			return op["value"]
		}
	}
	return nil
}

// How a pod takes a template: in place, restarting memcached's container
// for its image and memcached in its container for its settings; replaced
// when its shape is another.
func TestInPlaceStep(t *testing.T) {
	g := NewWithT(t)

	s := inPlaceStep(inPlacePod("c1"), "r2", inPlaceTemplate("memcached:2", "--threads=4"), inPlaceNow)
	g.Expect(s.kind).To(Equal(restartContainer))
	g.Expect(s.ops).To(ContainElements(
		map[string]any{"op": "test", "path": "/metadata/uid", "value": types.UID("u1")},
		map[string]any{"op": "test", "path": "/spec/containers/0/name", "value": desired.ContainerName},
		map[string]any{"op": "replace", "path": "/spec/containers/0/image", "value": "memcached:2"},
		map[string]any{"op": "replace", "path": "/metadata/labels/controller-revision-hash", "value": "r2"}))
	g.Expect(restartingFrom(s)).To(Equal("c1"))
	g.Expect(s.with).To(Equal("with image memcached:2"))

	s = inPlaceStep(inPlacePod("c1"), "r2", inPlaceTemplate("memcached:1", "--threads=2\n-v"), inPlaceNow)
	g.Expect(s.kind).To(Equal(restartForSettings))
	g.Expect(s.ops).To(ContainElement(map[string]any{"op": "add", "path": "/metadata/annotations/cache.example.com~1memcached-settings", "value": "--threads=2\n-v"}))
	g.Expect(restartingFrom(s)).To(Equal("settings since 2026-12-04T10:20:30Z"))
	g.Expect(s.with).To(Equal("with settings --threads=2 -v"))

	s = inPlaceStep(inPlacePod("c1"), "r2", inPlaceTemplate("memcached:2", "--threads=2"), inPlaceNow)
	g.Expect(s.kind).To(Equal(restartContainer), "the new container reads the new settings as it starts")

	s = inPlaceStep(inPlacePod(""), "r2", inPlaceTemplate("memcached:1", "--threads=2"), inPlaceNow)
	g.Expect(s.kind).To(Equal(noRestart), "no memcached runs: it takes them as it starts")
	g.Expect(restartingFrom(s)).To(BeNil())

	s = inPlaceStep(inPlacePod(""), "r2", inPlaceTemplate("memcached:2", "--threads=4"), inPlaceNow)
	g.Expect(s.kind).To(Equal(restartContainer), "an image that could not start: the kubelet starts the new one")
	g.Expect(restartingFrom(s)).To(Equal("none"))
	ready := inPlacePod("")
	ready.Ready = true
	s = inPlaceStep(ready, "r2", inPlaceTemplate("memcached:2", "--threads=4"), inPlaceNow)
	g.Expect(s.kind).To(Equal(replace), "ready with no container: a node that runs none, which restarts nothing")
	g.Expect(s.why).NotTo(BeEmpty())

	s = inPlaceStep(inPlacePod("c1"), "r2", inPlaceTemplate("memcached:1", "--threads=4"), inPlaceNow)
	g.Expect(s.kind).To(Equal(noRestart))
	g.Expect(restartingFrom(s)).To(BeNil())

	other := inPlacePod("c1")
	other.Shape = "another"
	g.Expect(inPlaceStep(other, "r2", inPlaceTemplate("memcached:1", "--threads=2"), inPlaceNow).kind).To(Equal(replace))
}

// A memory limit is a setting too, where the pod's memory volume holds
// it; a larger one needs a new pod.
func TestInPlaceStepOfAMemoryLimit(t *testing.T) {
	g := NewWithT(t)
	memory := func(settings, volume string) *appsv1ac.StatefulSetApplyConfiguration {
		t := inPlaceTemplate("memcached:1", settings)
		t.Spec.Template.Spec.WithVolumes(corev1ac.Volume().WithName(desired.MemoryVolumeName).
			WithEmptyDir(corev1ac.EmptyDirVolumeSource().WithMedium(corev1.StorageMediumMemory).WithSizeLimit(resource.MustParse(volume))))
		return t
	}
	holding := inPlacePod("c1")
	holding.MemoryVolume = ptr.To(resource.MustParse("129Mi"))
	s := inPlaceStep(holding, "r2", memory("--memory-limit=96\n--threads=4", "97Mi"), inPlaceNow)
	g.Expect(s.kind).To(Equal(restartForSettings), "a smaller memory limit")
	g.Expect(s.with).To(Equal("with settings --memory-limit=96 --threads=4"))
	g.Expect(inPlaceStep(holding, "r2", memory("--memory-limit=128\n--threads=4", "129Mi"), inPlaceNow).kind).To(Equal(restartForSettings), "as large as the volume")
	s = inPlaceStep(holding, "r2", memory("--memory-limit=256\n--threads=4", "257Mi"), inPlaceNow)
	g.Expect(s.kind).To(Equal(replace), "a larger memory limit")
	g.Expect(s.why).To(Equal("memcached's new memory limit needs a memory volume of 257Mi, and the pod's is 129Mi: a pod's volumes cannot grow"))
}

// Resources are resized in place first, as the apiserver defaults them (a
// limit is the request too); none can be removed.
func TestInPlaceStepOfResources(t *testing.T) {
	g := NewWithT(t)
	resized := inPlaceTemplate("memcached:1", "--threads=4")
	resized.Spec.Template.Spec.Containers[0].WithResources(corev1ac.ResourceRequirements().
		WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}).
		WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}))
	s := inPlaceStep(inPlacePod("c1"), "r2", resized, inPlaceNow)
	g.Expect(s.kind).To(Equal(noRestart))
	g.Expect(s.resize).To(Equal(&resize{index: 0, resources: corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}}))
	same := inPlacePod("c1")
	same.Resources = corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1024Mi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	g.Expect(inPlaceStep(same, "r2", resized, inPlaceNow).resize).To(BeNil(), "the same quantities")
	more := inPlacePod("c1")
	more.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	g.Expect(inPlaceStep(more, "r2", resized, inPlaceNow).kind).To(Equal(replace), "a CPU limit removed")

	g.Expect(resizing(&owned.Pod{Resizing: "Deferred: no room"})).To(BeTrue())
	g.Expect(resizing(&owned.Pod{Resources: same.Resources, Resized: &corev1.ResourceRequirements{}})).To(BeTrue(), "the kubelet runs other resources")
	g.Expect(resizing(&owned.Pod{Resources: same.Resources, Resized: same.Resources.DeepCopy()})).To(BeFalse())
	g.Expect(resizing(&owned.Pod{Resources: same.Resources})).To(BeFalse(), "a kubelet that says nothing of it")
}
