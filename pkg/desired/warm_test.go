package desired

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

func TestRunsWarm(t *testing.T) {
	withOperator := Images{Memcached: "memcached:1", Exporter: "exporter:1", Reloader: "operator:1"}
	limit := func(q string) *corev1.ResourceRequirements {
		return &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}}
	}
	tests := []struct {
		name   string
		spec   cachev1alpha1.MemcachedSpec
		images Images
		want   bool
	}{
		{"memcached's default limit", cachev1alpha1.MemcachedSpec{}, withOperator, true},
		{"no operator image to run it", cachev1alpha1.MemcachedSpec{}, testImages, false},
		{"the smallest limit memcached maps a file with", cachev1alpha1.MemcachedSpec{MemoryLimitMiB: ptr.To[int32](WarmMinimumMiB)}, withOperator, true},
		{"below it", cachev1alpha1.MemcachedSpec{MemoryLimitMiB: ptr.To[int32](WarmMinimumMiB - 1)}, withOperator, false},
		{"a container limit that holds the file", cachev1alpha1.MemcachedSpec{Resources: limit("64Mi")}, withOperator, true},
		{"a container limit smaller than the file", cachev1alpha1.MemcachedSpec{Resources: limit("63Mi")}, withOperator, false},
		{"requests only", cachev1alpha1.MemcachedSpec{Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Mi")}}}, withOperator, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(RunsWarm(memcached("cache", tt.spec), tt.images)).To(Equal(tt.want))
		})
	}
}

// memcached runs under the warm runner, its memory file on a memory-backed
// volume as large as its memory limit, and the runner is copied into the
// pod from the operator's image before memcached starts.
func TestWarmPodsMapTheirMemoryFromTheMemoryVolume(t *testing.T) {
	g := NewWithT(t)
	images := Images{Memcached: "memcached:1", Exporter: "exporter:1", Reloader: "operator:1"}
	m := memcached("cache", cachev1alpha1.MemcachedSpec{MemoryLimitMiB: ptr.To[int32](1024), Threads: ptr.To[int32](2)})
	pod := StatefulSet(m, images, SecretDigests{}).Spec.Template.Spec

	c := pod.Containers[0]
	g.Expect(c.Command).To(Equal([]string{"/opt/memcached-operator/warm", "--memory-file=/var/lib/memcached/memory", "--settings-file=/etc/memcached-settings/flags",
		"--", "memcached", "--port=11211"}), "the memory limit and the threads come from the settings file")
	g.Expect(StatefulSet(m, images, SecretDigests{}).Spec.Template.Annotations[AnnotationMemcachedSettings]).To(Equal("--memory-limit=1024\n--threads=2"))
	g.Expect(*c.VolumeMounts[1].Name).To(Equal(MemoryVolumeName))
	g.Expect(*c.VolumeMounts[1].MountPath).To(Equal("/var/lib/memcached"))
	g.Expect(c.VolumeMounts[1].ReadOnly).To(BeNil(), "memcached writes its memory file")
	g.Expect(*c.VolumeMounts[2].Name).To(Equal(settingsVolume))
	g.Expect(*c.VolumeMounts[2].MountPath).To(Equal("/etc/memcached-settings"))

	settings := false
	volumes := map[string]*resource.Quantity{}
	for _, v := range pod.Volumes {
		if *v.Name == settingsVolume {
			settings = true
			g.Expect(v.DownwardAPI.Items).To(HaveLen(1))
			g.Expect(*v.DownwardAPI.Items[0].Path).To(Equal("flags"))
			g.Expect(*v.DownwardAPI.Items[0].FieldRef.FieldPath).To(Equal("metadata.annotations['cache.example.com/memcached-settings']"))
		}
		if v.EmptyDir != nil {
			volumes[*v.Name] = v.EmptyDir.SizeLimit
		}
		if *v.Name == MemoryVolumeName {
			g.Expect(*v.EmptyDir.Medium).To(Equal(corev1.StorageMediumMemory))
		}
	}
	g.Expect(volumes[MemoryVolumeName].String()).To(Equal("1025Mi"), "the file, and room for what memcached saves beside it")
	g.Expect(volumes).To(HaveKey(warmVolume))
	g.Expect(settings).To(BeTrue())

	g.Expect(pod.InitContainers).To(HaveLen(1))
	g.Expect(*pod.InitContainers[0].Image).To(Equal("operator:1"))
	g.Expect(pod.InitContainers[0].Command).To(Equal([]string{"/warm", "--install=/opt/memcached-operator/warm"}))

	cold := StatefulSet(memcached("cache", cachev1alpha1.MemcachedSpec{MemoryLimitMiB: ptr.To[int32](16)}), images, SecretDigests{}).Spec.Template.Spec
	g.Expect(cold.Containers[0].Command[0]).To(Equal("memcached"))
	g.Expect(cold.InitContainers).To(BeEmpty())
}

// Where memcached runs warm the operator rolls the pods (OnDelete), and a
// pod takes in place a template of its shape: one that differs in images
// (memcached's or the operator's), pod labels, pod annotations and the
// settings memcached keeps across a warm restart only.
// Anything else is another shape, which replaces the pod.
func TestOnlyImagesKeepThePodShape(t *testing.T) {
	withOperator := Images{Memcached: "memcached:1", Exporter: "exporter:1", Reloader: "operator:1"}
	base := cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2), Monitoring: &cachev1alpha1.MonitoringSpec{Enabled: true}}
	shape := func(spec cachev1alpha1.MemcachedSpec, images Images) string {
		return StatefulSet(memcached("cache", spec), images, SecretDigests{}).Spec.Template.Annotations[AnnotationPodShape]
	}
	g := NewWithT(t)
	was := shape(base, withOperator)
	g.Expect(was).NotTo(BeEmpty())
	g.Expect(*StatefulSet(memcached("cache", base), withOperator, SecretDigests{}).Spec.UpdateStrategy.Type).To(Equal(appsv1.OnDeleteStatefulSetStrategyType))

	same := []struct {
		name   string
		spec   func(*cachev1alpha1.MemcachedSpec)
		images Images
	}{
		{"memcached's image", func(s *cachev1alpha1.MemcachedSpec) { s.Image = "memcached:2" }, withOperator},
		{"the operator's images", func(*cachev1alpha1.MemcachedSpec) {}, Images{Memcached: "memcached:1", Exporter: "exporter:2", Reloader: "operator:2"}},
		{"the size", func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](5) }, withOperator},
		{"a pod label", func(s *cachev1alpha1.MemcachedSpec) {
			s.PodLabels = map[string]cachev1alpha1.LabelValue{"team": "a"}
		}, withOperator},
		{"a pod annotation", func(s *cachev1alpha1.MemcachedSpec) {
			s.PodAnnotations = map[string]cachev1alpha1.AnnotationValue{"example.com/owner": "b"}
		}, withOperator},
		// Settings memcached keeps across a warm restart: the pod's
		// annotation holds them.
		{"threads", func(s *cachev1alpha1.MemcachedSpec) { s.Threads = ptr.To[int32](8) }, withOperator},
		{"connections", func(s *cachev1alpha1.MemcachedSpec) { s.MaxConnections = ptr.To[int32](100) }, withOperator},
		{"verbosity", func(s *cachev1alpha1.MemcachedSpec) { s.Verbosity = ptr.To[int32](1) }, withOperator},
		// memcached restarts in its container, empty (the memory limit
		// where the pod's memory volume holds it: MemoryVolumeSize).
		{"the maximum item size", func(s *cachev1alpha1.MemcachedSpec) { s.MaxItemSize = "2Mi" }, withOperator},
		{"the memory limit", func(s *cachev1alpha1.MemcachedSpec) { s.MemoryLimitMiB = ptr.To[int32](128) }, withOperator},
		// Resized in place where the cluster can.
		{"resources", func(s *cachev1alpha1.MemcachedSpec) {
			s.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
		}, withOperator},
	}
	for _, tt := range same {
		t.Run(tt.name, func(t *testing.T) {
			spec := *base.DeepCopy()
			tt.spec(&spec)
			NewWithT(t).Expect(shape(spec, tt.images)).To(Equal(was))
		})
	}
	other := []struct {
		name string
		spec func(*cachev1alpha1.MemcachedSpec)
	}{
		{"a memory limit memcached takes no memory file with (memcached no longer runs warm)", func(s *cachev1alpha1.MemcachedSpec) {
			s.MemoryLimitMiB = ptr.To[int32](WarmMinimumMiB - 1)
		}},
		{"the port", func(s *cachev1alpha1.MemcachedSpec) { s.ContainerPort = ptr.To[int32](11311) }},
		{"a container memory limit below memcached's (memcached no longer runs warm)", func(s *cachev1alpha1.MemcachedSpec) {
			s.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}}
		}},
	}
	for _, tt := range other {
		t.Run(tt.name, func(t *testing.T) {
			spec := *base.DeepCopy()
			tt.spec(&spec)
			NewWithT(t).Expect(shape(spec, withOperator)).NotTo(Equal(was))
		})
	}

	// New Secret content a pod could not load in place needs new pods.
	withTLS := *base.DeepCopy()
	withTLS.TLS = &cachev1alpha1.TLSSpec{SecretName: "cache-tls"}
	loaded := StatefulSet(memcached("cache", withTLS), withOperator, SecretDigests{TLS: "t"})
	restarted := StatefulSet(memcached("cache", withTLS), withOperator, SecretDigests{TLS: "t", RestartedFor: "t"})
	g.Expect(restarted.Spec.Template.Annotations[AnnotationPodShape]).NotTo(Equal(loaded.Spec.Template.Annotations[AnnotationPodShape]))

	// Pods that do not run warm roll as the StatefulSet controller rolls
	// them, and carry no shape.
	set := StatefulSet(memcached("cache", base), testImages, SecretDigests{})
	g.Expect(*set.Spec.UpdateStrategy.Type).To(Equal(appsv1.RollingUpdateStatefulSetStrategyType))
	g.Expect(set.Spec.Template.Annotations).NotTo(HaveKey(AnnotationPodShape))
}

// The memory volume of a template's pods, which bounds the memory limit
// memcached can take in place, is sized to memcached's memory limit.
func TestMemoryVolumeSize(t *testing.T) {
	g := NewWithT(t)
	images := Images{Memcached: "memcached:1", Exporter: "exporter:1", Reloader: "operator:1"}
	size := func(spec cachev1alpha1.MemcachedSpec, images Images) *resource.Quantity {
		return MemoryVolumeSize(StatefulSet(memcached("cache", spec), images, SecretDigests{}).Spec.Template)
	}
	g.Expect(size(cachev1alpha1.MemcachedSpec{}, images).String()).To(Equal("65Mi"))
	g.Expect(size(cachev1alpha1.MemcachedSpec{MemoryLimitMiB: ptr.To[int32](48)}, images).String()).To(Equal("49Mi"))
	g.Expect(size(cachev1alpha1.MemcachedSpec{}, Images{Memcached: "memcached:1"})).To(BeNil(), "no warm pods, no memory volume")
}

// What memcached keeps no item across: its memory limit and maximum item
// size, a flag left out standing for memcached's default.
func TestNotKept(t *testing.T) {
	g := NewWithT(t)
	g.Expect(NotKept([]string{"--threads=4"}, []string{"--threads=2", "-v"})).To(BeEmpty())
	g.Expect(NotKept(nil, []string{"--memory-limit=64", "--max-item-size=1048576"})).To(BeEmpty(), "memcached's defaults written out")
	g.Expect(NotKept([]string{"--memory-limit=128"}, []string{"--memory-limit=96"})).To(Equal("its memory limit"))
	g.Expect(NotKept(nil, []string{"--max-item-size=2097152"})).To(Equal("its maximum item size"))
	g.Expect(NotKept([]string{"--memory-limit=128"}, []string{"--max-item-size=2097152"})).To(Equal("its memory limit and its maximum item size"))
}
