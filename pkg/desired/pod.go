package desired

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/jsonconv"
)

func podSpec(m *cachev1alpha1.Memcached, images Images) *corev1ac.PodSpecApplyConfiguration {
	ps := corev1ac.PodSpec().
		WithAutomountServiceAccountToken(false).
		WithTerminationGracePeriodSeconds(gracePeriodSeconds(m, images)).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithContainers(container(m, images))
	if RunsExporter(m) {
		ps.WithContainers(exporter(m, images))
	}
	if RunsDiscovery(m, images) {
		ps.WithContainers(discoveryContainer(m, images))
	}
	if RunsWarm(m, images) {
		ps.WithInitContainers(warmInstall(images))
		ps.WithVolumes(warmVolumes(m)...)
	}
	if RunsReloader(m, images) {
		ps.WithInitContainers(reloaderPrepare(m, images))
		ps.WithContainers(reloader(m, images))
		ps.WithVolumes(corev1ac.Volume().WithName(servedVolume).WithEmptyDir(corev1ac.EmptyDirVolumeSource().
			WithMedium(corev1.StorageMediumMemory).
			WithSizeLimit(resource.MustParse(servedSize))))
		if m.Spec.Auth != nil {
			// The reloader signals memcached to read its authentication
			// file again: it must see memcached's process.
			ps.WithShareProcessNamespace(true)
		}
	}
	if m.Spec.TLS != nil {
		ps.WithVolumes(secretVolume(tlsVolume, m.Spec.TLS.SecretName, TLSKeys(m)...))
	}
	if m.Spec.Auth != nil {
		v := secretVolume(authVolume, m.Spec.Auth.SecretName)
		v.Secret.WithItems(corev1ac.KeyToPath().WithKey(AuthKey(m)).WithPath(authFile))
		ps.WithVolumes(v)
	}
	if len(ps.Volumes) > 0 {
		// The mounted Secrets belong to this group, which every container
		// of the pod joins.
		ps.SecurityContext.WithFSGroup(memcachedUser)
	}
	if RunsDiscovery(m, images) {
		// Readable by every user: the membership is no secret.
		ps.WithVolumes(membershipVolumeOf(m))
	}
	if HandsOffOnDeletion(m, images) {
		ps.WithVolumes(handOffVolumeOf())
	}
	withScheduling(ps, m)
	return ps
}

// withScheduling sets what decides where m's pods run, and whose images
// they may pull: the spec's fields as they are, and when it sets no spread
// constraint, a spread across nodes.
func withScheduling(ps *corev1ac.PodSpecApplyConfiguration, m *cachev1alpha1.Memcached) {
	for _, s := range m.Spec.ImagePullSecrets {
		ps.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName(s.Name))
	}
	if m.Spec.PriorityClassName != "" {
		ps.WithPriorityClassName(m.Spec.PriorityClassName)
	}
	if len(m.Spec.NodeSelector) > 0 {
		ps.WithNodeSelector(stringMap(m.Spec.NodeSelector))
	}
	if m.Spec.Affinity != nil {
		ps.Affinity = passThrough[corev1ac.AffinityApplyConfiguration](m.Spec.Affinity)
	}
	for i := range m.Spec.Tolerations {
		ps.WithTolerations(passThrough[corev1ac.TolerationApplyConfiguration](&m.Spec.Tolerations[i]))
	}
	if len(m.Spec.TopologySpreadConstraints) > 0 {
		for i := range m.Spec.TopologySpreadConstraints {
			ps.WithTopologySpreadConstraints(passThrough[corev1ac.TopologySpreadConstraintApplyConfiguration](&m.Spec.TopologySpreadConstraints[i]))
		}
	} else {
		ps.WithTopologySpreadConstraints(corev1ac.TopologySpreadConstraint().
			WithMaxSkew(1).
			WithTopologyKey(corev1.LabelHostname).
			WithWhenUnsatisfiable(corev1.ScheduleAnyway).
			WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m))).
			// Spread each revision on its own: during a rollout, the old
			// pods about to go do not count.
			WithMatchLabelKeys(appsv1.ControllerRevisionHashLabelKey))
	}
}

// secretVolume mounts the Secret name, as the files keys, readable by the pod's fsGroup only.
func secretVolume(volume, name string, keys ...string) *corev1ac.VolumeApplyConfiguration {
	src := corev1ac.SecretVolumeSource().WithSecretName(name).WithDefaultMode(secretFileMode)
	for _, k := range keys {
		src.WithItems(corev1ac.KeyToPath().WithKey(k).WithPath(k))
	}
	return corev1ac.Volume().WithName(volume).WithSecret(src)
}

func mount(volume, dir string) *corev1ac.VolumeMountApplyConfiguration {
	return corev1ac.VolumeMount().WithName(volume).WithMountPath(dir).WithReadOnly(true)
}

// passThrough turns a value of the core API into its apply configuration,
// field for field: both have the same JSON form. A value that came out of
// the API always encodes, so a failure here is a bug, and panics.
func passThrough[A any, T any](v *T) *A {
	a := new(A)
	if err := jsonconv.Convert(v, a); err != nil {
		panic(err.Error())
	}
	return a
}

// restricted is the security context of the Pod Security Standards'
// restricted profile, running as user uid.
func restricted(uid int64) *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithRunAsNonRoot(true).
		WithRunAsUser(uid).
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))
}

func resources(r *corev1.ResourceRequirements) *corev1ac.ResourceRequirementsApplyConfiguration {
	if r == nil || (len(r.Limits) == 0 && len(r.Requests) == 0 && len(r.Claims) == 0) {
		return nil
	}
	ac := corev1ac.ResourceRequirements()
	if len(r.Limits) > 0 {
		ac.WithLimits(r.Limits.DeepCopy())
	}
	if len(r.Requests) > 0 {
		ac.WithRequests(r.Requests.DeepCopy())
	}
	for _, c := range r.Claims {
		claim := corev1ac.ResourceClaim().WithName(c.Name)
		if c.Request != "" {
			claim.WithRequest(c.Request)
		}
		ac.WithClaims(claim)
	}
	return ac
}
