package owned

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/pkg/desired"
)

func runsMemcached(p *Pod) bool {
	for _, c := range p.Images {
		if c.Name == desired.ContainerName && !c.Init {
			return true
		}
	}
	return false
}

func readImages(pod *corev1.Pod, s *Pod) {
	for _, c := range pod.Spec.InitContainers {
		s.Images = append(s.Images, ContainerImage{Name: c.Name, Image: c.Image, Init: true})
	}
	for _, c := range pod.Spec.Containers {
		s.Images = append(s.Images, ContainerImage{Name: c.Name, Image: c.Image})
	}
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == desired.ContainerName {
			s.MemcachedID = st.ContainerID
		}
	}
}

// readResources reads memcached's resources where the pod can take a
// template in place (it has a shape).
func readResources(pod *corev1.Pod, s *Pod) {
	if pod.Annotations[desired.AnnotationPodShape] == "" {
		return
	}
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == desired.ContainerName {
			s.Resized = st.Resources
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == desired.ContainerName {
			s.Resources = c.Resources
		}
	}
	for _, c := range pod.Status.Conditions {
		if (c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress) && c.Status == corev1.ConditionTrue {
			s.Resizing = strings.TrimSuffix(c.Reason+": "+c.Message, ": ")
			s.ResizeFailed = s.ResizeFailed || c.Reason == corev1.PodReasonInfeasible || c.Reason == corev1.PodReasonError
		}
	}
}

func readMemoryVolume(pod *corev1.Pod, s *Pod) {
	if pod.Annotations[desired.AnnotationPodShape] == "" {
		return
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == desired.MemoryVolumeName && v.EmptyDir != nil {
			s.MemoryVolume = v.EmptyDir.SizeLimit
		}
	}
}

// readMetadata keeps the labels and annotations of a pod that can take a
// template in place (it has a shape).
func readMetadata(pod *corev1.Pod, s *Pod) {
	if pod.Annotations[desired.AnnotationPodShape] != "" {
		s.Labels, s.Annotations = pod.Labels, pod.Annotations
	}
}

func readRevision(pod *corev1.Pod, s *Pod) {
	s.Revision = pod.Labels[appsv1.ControllerRevisionHashLabelKey]
	s.RestartingFrom = pod.Annotations[desired.AnnotationRestartingFrom]
}

func readTold(pod *corev1.Pod, s *Pod) {
	s.MembershipVersion = pod.Annotations[desired.AnnotationMembershipVersion]
	s.MembershipSeal = pod.Annotations[desired.AnnotationMembershipSeal]
	s.MembershipRetold = pod.Annotations[desired.AnnotationMembershipRetold]
	s.SecretsDigest = pod.Annotations[desired.AnnotationSecretsDigest]
}
