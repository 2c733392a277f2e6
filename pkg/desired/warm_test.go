package desired

import (
	"testing"

	. "github.com/onsi/gomega"
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
	g.Expect(c.Command).To(Equal(append([]string{"/opt/memcached-operator/warm", "--memory-file=/var/lib/memcached/memory", "--"}, Command(m)...)))
	g.Expect(*c.VolumeMounts[1].Name).To(Equal(memoryVolume))
	g.Expect(*c.VolumeMounts[1].MountPath).To(Equal("/var/lib/memcached"))
	g.Expect(c.VolumeMounts[1].ReadOnly).To(BeNil(), "memcached writes its memory file")

	volumes := map[string]*resource.Quantity{}
	for _, v := range pod.Volumes {
		if v.EmptyDir != nil {
			volumes[*v.Name] = v.EmptyDir.SizeLimit
		}
		if *v.Name == memoryVolume {
			g.Expect(*v.EmptyDir.Medium).To(Equal(corev1.StorageMediumMemory))
		}
	}
	g.Expect(volumes[memoryVolume].String()).To(Equal("1025Mi"), "the file, and room for what memcached saves beside it")
	g.Expect(volumes).To(HaveKey(warmVolume))

	g.Expect(pod.InitContainers).To(HaveLen(1))
	g.Expect(*pod.InitContainers[0].Image).To(Equal("operator:1"))
	g.Expect(pod.InitContainers[0].Command).To(Equal([]string{"/warm", "--install=/opt/memcached-operator/warm"}))

	cold := StatefulSet(memcached("cache", cachev1alpha1.MemcachedSpec{MemoryLimitMiB: ptr.To[int32](16)}), images, SecretDigests{}).Spec.Template.Spec
	g.Expect(cold.Containers[0].Command[0]).To(Equal("memcached"))
	g.Expect(cold.InitContainers).To(BeEmpty())
}
