package desired

import (
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/settings"
)

const (
	// WarmInstallContainerName is the init container that copies the warm
	// runner (cmd/warm) from the operator's image to the pod, for the
	// memcached container to run memcached under.
	WarmInstallContainerName = "warm-install"
	// WarmMinimumMiB is the smallest memory limit at which memcached
	// (1.6.18) accepts a memory file: it then takes a page of 1 MiB for
	// each of its 39 slab classes at start, and refuses less memory.
	WarmMinimumMiB = 39

	// warmCommand is the warm runner's path in the operator's image.
	warmCommand = "/warm"
	// warmVolume holds the copy of the warm runner, at warmDir.
	warmVolume = "warm"
	warmDir    = "/opt/memcached-operator"
	warmSize   = "16Mi"
	// MemoryVolumeName is the memory-backed volume of memcached's memory
	// file, at memoryDir: it outlives memcached's container, not the pod.
	MemoryVolumeName = "memory"
	memoryDir        = "/var/lib/memcached"
	memoryFile       = "memory"
	// settingsVolume holds, at settingsDir/settingsFile, the pod's
	// AnnotationMemcachedSettings (the downward API), which the kubelet
	// writes anew when the annotation changes and the runner reads.
	settingsVolume = "memcached-settings"
	settingsDir    = "/etc/memcached-settings"
	settingsFile   = "flags"
	// memcachedDefaultMiB is memcached's memory limit when spec sets none.
	memcachedDefaultMiB = 64
	// memcachedDefaultItemSize is memcached's maximum item size when spec
	// sets none, in bytes.
	memcachedDefaultItemSize = 1 << 20
)

// RunsWarm tells whether m's memcached restarts warm: a restart of its
// container (a new image, a failed liveness probe) keeps the cache. It
// needs the operator's image (Images.Reloader), which holds the runner, a
// memory limit memcached accepts a memory file with, and room for the file
// under the container's memory limit, if spec.resources sets one: memcached
// touches a page of the file for each slab class at start (40 MiB), and
// the whole of it at a full cache.
func RunsWarm(m *cachev1alpha1.Memcached, images Images) bool {
	if images.Reloader == "" || memoryLimitMiB(m) < WarmMinimumMiB {
		return false
	}
	if r := m.Spec.Resources; r != nil {
		if l, ok := r.Limits[corev1.ResourceMemory]; ok && l.Value() < int64(memoryLimitMiB(m))<<20 {
			return false
		}
	}
	return true
}

// memoryLimitMiB is memcached's memory limit for m, in MiB.
func memoryLimitMiB(m *cachev1alpha1.Memcached) int32 {
	if v := m.Spec.MemoryLimitMiB; v != nil {
		return *v
	}
	return memcachedDefaultMiB
}

// warmCommandLine is the memcached container's command line when memcached
// runs warm: the runner, then memcached's own.
func warmCommandLine(memcached []string) []string {
	return append([]string{
		path.Join(warmDir, path.Base(warmCommand)),
		"--memory-file=" + path.Join(memoryDir, memoryFile),
		"--settings-file=" + path.Join(settingsDir, settingsFile),
		"--",
	}, memcached...)
}

// warmInstall is the init container that copies the runner into the
// pod's warm volume.
func warmInstall(images Images) *corev1ac.ContainerApplyConfiguration {
	return corev1ac.Container().
		WithName(WarmInstallContainerName).
		WithImage(images.Reloader).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		WithCommand(warmCommand, "--install="+path.Join(warmDir, path.Base(warmCommand))).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(reloaderCPURequest),
				corev1.ResourceMemory: resource.MustParse(reloaderMemory),
			}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(reloaderMemory)})).
		WithSecurityContext(restricted(memcachedUser)).
		WithVolumeMounts(corev1ac.VolumeMount().WithName(warmVolume).WithMountPath(warmDir))
}

// warmVolumes are the runner's volume and memcached's memory volume, sized
// to hold the memory file (as large as the memory limit) and what memcached
// saves beside it.
func warmVolumes(m *cachev1alpha1.Memcached) []*corev1ac.VolumeApplyConfiguration {
	return []*corev1ac.VolumeApplyConfiguration{
		corev1ac.Volume().WithName(warmVolume).WithEmptyDir(corev1ac.EmptyDirVolumeSource().
			WithSizeLimit(resource.MustParse(warmSize))),
		corev1ac.Volume().WithName(MemoryVolumeName).WithEmptyDir(corev1ac.EmptyDirVolumeSource().
			WithMedium(corev1.StorageMediumMemory).
			WithSizeLimit(resource.MustParse(strconv.Itoa(int(memoryLimitMiB(m))+1) + "Mi"))),
		corev1ac.Volume().WithName(settingsVolume).WithDownwardAPI(corev1ac.DownwardAPIVolumeSource().
			WithItems(corev1ac.DownwardAPIVolumeFile().
				WithPath(settingsFile).
				WithFieldRef(corev1ac.ObjectFieldSelector().WithAPIVersion("v1").
					WithFieldPath("metadata.annotations['" + AnnotationMemcachedSettings + "']")))),
	}
}

// MemoryVolumeSize is the size of the memory volume of template's pods,
// which bounds the memory limit memcached can take in place on them; nil
// when they have none (memcached does not run warm).
func MemoryVolumeSize(template *corev1ac.PodTemplateSpecApplyConfiguration) *resource.Quantity {
	if template == nil || template.Spec == nil {
		return nil
	}
	for _, v := range template.Spec.Volumes {
		if v.Name != nil && *v.Name == MemoryVolumeName && v.EmptyDir != nil {
			return v.EmptyDir.SizeLimit
		}
	}
	return nil
}

// warmSettings is the value of AnnotationMemcachedSettings for m.
func warmSettings(m *cachev1alpha1.Memcached) string {
	return settings.Format(ContainerSettings(m))
}

// warmMounts are the memcached container's mounts of them.
func warmMounts() []*corev1ac.VolumeMountApplyConfiguration {
	return []*corev1ac.VolumeMountApplyConfiguration{
		mount(warmVolume, warmDir),
		corev1ac.VolumeMount().WithName(MemoryVolumeName).WithMountPath(memoryDir),
		corev1ac.VolumeMount().WithName(settingsVolume).WithMountPath(settingsDir).WithReadOnly(true),
	}
}
