package desired

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// Deployment is the Deployment that runs m's memcached pods, named after m
// and controlled by it, with the images of m's spec or else images.
//
// It rolls out as a cache should: one extra pod at a time and none taken
// away before its replacement is ready (maxSurge 1, maxUnavailable 0), so
// that a rollout never lowers the number of serving pods.
//
// The pods mount the Secrets of spec.tls and spec.auth. With a reloader
// they load new content in place, and the template changes only when a
// pod could not (digests.RestartedFor); without one they carry digests of
// the content, so that new content rolls them the same way.
func Deployment(m *cachev1alpha1.Memcached, images Images, digests SecretDigests) *appsv1ac.DeploymentApplyConfiguration {
	template := corev1ac.PodTemplateSpec().
		WithLabels(podLabels(m)).
		WithSpec(podSpec(m, images))
	annotations := stringMap(m.Spec.PodAnnotations)
	switch {
	case RunsReloader(m, images):
		if digests.RestartedFor != "" {
			annotations[AnnotationRestartedFor] = digests.RestartedFor
		}
	default:
		if m.Spec.TLS != nil && digests.TLS != "" {
			annotations[AnnotationTLSDigest] = digests.TLS
		}
		if m.Spec.Auth != nil && digests.Auth != "" {
			annotations[AnnotationAuthDigest] = digests.Auth
		}
	}
	if len(annotations) > 0 {
		template.WithAnnotations(annotations)
	}
	return appsv1ac.Deployment(m.Name, m.Namespace).
		WithLabels(Labels(m)).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(Replicas(m)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m))).
			WithStrategy(appsv1ac.DeploymentStrategy().
				WithType(appsv1.RollingUpdateDeploymentStrategyType).
				WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
					WithMaxUnavailable(intstr.FromInt32(0)).
					WithMaxSurge(intstr.FromInt32(1)))).
			WithTemplate(template))
}

// podLabels are the labels of m's pods: spec.podLabels, then the
// operator's own, which the CRD forbids podLabels to set.
func podLabels(m *cachev1alpha1.Memcached) map[string]string {
	l := stringMap(m.Spec.PodLabels)
	maps.Copy(l, Labels(m))
	return l
}
