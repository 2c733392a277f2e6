package desired

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// StatefulSet is the StatefulSet that runs m's memcached pods, named after
// m and controlled by it, with the images of m's spec or else images.
//
// Each pod is a slot: <name>-0 to <name>-<size-1>, with a stable DNS name
// through m's headless Service (<name>-<k>.<name>.<namespace>.svc), and a
// pod replaced comes back in its slot under the same name. Clients that
// hash keys over the slots' names keep every key's place when a pod is
// replaced or moves.
//
// The pods are made and removed all at once on a scale (Parallel: slots do
// not depend on each other), and a change rolls one slot at a time, from
// the last, each only once the one before is ready. Where memcached runs
// warm, the operator rolls them (OnDelete): a change of images only is
// made in place, on the pod, and memcached's container restarts with its
// cache; the template's AnnotationPodShape tells a pod whether it can be.
// Pod labels and annotations change in place too, with no restart, and so
// do the settings memcached keeps across a warm restart, which its pods
// read from an annotation (AnnotationMemcachedSettings): memcached
// restarts warm in its container to take them. Other changes replace the
// pod, as the StatefulSet controller would.
//
// The pods mount the Secrets of spec.tls and spec.auth. With a reloader
// they load new content in place, and the template changes only when a
// pod could not (digests.RestartedFor); without one they carry digests of
// the content, so that new content rolls them the same way.
func StatefulSet(m *cachev1alpha1.Memcached, images Images, digests SecretDigests) *appsv1ac.StatefulSetApplyConfiguration {
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
	strategy := appsv1.RollingUpdateStatefulSetStrategyType
	if RunsWarm(m, images) {
		strategy = appsv1.OnDeleteStatefulSetStrategyType
		template.WithAnnotations(map[string]string{
			AnnotationPodMetadataKeys: PodMetadataKeys{
				Labels:      slices.Sorted(maps.Keys(m.Spec.PodLabels)),
				Annotations: slices.Sorted(maps.Keys(m.Spec.PodAnnotations)),
			}.String(),
			// Empty too: new settings replace it on a pod.
			AnnotationMemcachedSettings: warmSettings(m),
		})
		template.WithAnnotations(map[string]string{AnnotationPodShape: podShape(template)})
	}
	return appsv1ac.StatefulSet(m.Name, m.Namespace).
		WithLabels(Labels(m)).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(appsv1ac.StatefulSetSpec().
			WithReplicas(Replicas(m)).
			WithServiceName(m.Name).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m))).
			WithPodManagementPolicy(appsv1.ParallelPodManagement).
			WithUpdateStrategy(appsv1ac.StatefulSetUpdateStrategy().
				WithType(strategy)).
			WithTemplate(template))
}

// SlotHost is the stable DNS name of slot k of the Memcached name in
// namespace: its pod's name under the headless Service.
func SlotHost(name, namespace string, k int) string {
	return name + "-" + itoa(k) + "." + ServiceHost(name, namespace)
}

// podLabels are the labels of m's pods: spec.podLabels, then the
// operator's own, which the CRD forbids podLabels to set.
func podLabels(m *cachev1alpha1.Memcached) map[string]string {
	l := stringMap(m.Spec.PodLabels)
	maps.Copy(l, Labels(m))
	return l
}

// PodMetadataKeys are the keys of a Memcached's spec.podLabels and
// spec.podAnnotations, as a pod template records them
// (AnnotationPodMetadataKeys).
type PodMetadataKeys struct {
	Labels      []string `json:"labels"`
	Annotations []string `json:"annotations"`
}

func (k PodMetadataKeys) String() string {
	b, err := json.Marshal(k)
	if err != nil {
		panic(err) // two lists of strings
	}
	return string(b)
}

// ParsePodMetadataKeys reads AnnotationPodMetadataKeys; none when it does
// not parse.
func ParsePodMetadataKeys(s string) PodMetadataKeys {
	var k PodMetadataKeys
	_ = json.Unmarshal([]byte(s), &k)
	return k
}

// restartAnnotations are the template annotations whose change needs a
// new pod: they stand for the content of what the pod mounts.
var restartAnnotations = []string{AnnotationTLSDigest, AnnotationAuthDigest, AnnotationRestartedFor}

// podShape is a digest of template with its containers' images, the
// memcached container's resources, the memory volume's size, the grace
// period, its labels and its annotations left out (but those of restartAnnotations): two templates
// of the same shape differ at most in what a pod can take in place
// (resources where the cluster resizes pods in place, a memory limit its
// memory volume holds: the operator replaces the pod where it cannot).
func podShape(template *corev1ac.PodTemplateSpecApplyConfiguration) string {
	t := *template
	meta := &metav1ac.ObjectMetaApplyConfiguration{}
	for _, k := range restartAnnotations {
		if v, ok := template.Annotations[k]; ok {
			meta.WithAnnotations(map[string]string{k: v})
		}
	}
	t.ObjectMetaApplyConfiguration = meta
	spec := *t.Spec
	t.Spec = &spec
	// The grace period bounds a hand-off, which takes longer the more
	// memcached holds (HandOffGraceSeconds): a pod that takes a new
	// memory limit in place keeps the one it was made with, as the
	// apiserver changes no pod's. Hashed as the one pods without a
	// hand-off have, so that their shapes stay as they were.
	spec.TerminationGracePeriodSeconds = ptr.To[int64](terminationGracePeriodSeconds)
	spec.InitContainers = withoutInPlace(spec.InitContainers)
	spec.Containers = withoutInPlace(spec.Containers)
	spec.Volumes = slices.Clone(spec.Volumes)
	for i, v := range spec.Volumes {
		spec.Volumes[i] = withoutFieldRefAPIVersion(v)
		if v.Name != nil && *v.Name == MemoryVolumeName && v.EmptyDir != nil {
			dir := *v.EmptyDir
			dir.SizeLimit = nil
			spec.Volumes[i].EmptyDir = &dir
		}
	}
	b, err := json.Marshal(t)
	if err != nil {
		// Apply configurations are plain data.
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// withoutFieldRefAPIVersion is v with its downward API files' field
// references hashed as the shapes of pods made before the operator set
// their apiVersion (the apiserver's default, v1, which it then owns) hash
// them: without it, so that setting it replaces no pod.
func withoutFieldRefAPIVersion(v corev1ac.VolumeApplyConfiguration) corev1ac.VolumeApplyConfiguration {
	files := func(items []corev1ac.DownwardAPIVolumeFileApplyConfiguration) []corev1ac.DownwardAPIVolumeFileApplyConfiguration {
		out := slices.Clone(items)
		for i, f := range out {
			if f.FieldRef != nil {
				ref := *f.FieldRef
				ref.APIVersion = nil
				out[i].FieldRef = &ref
			}
		}
		return out
	}
	if v.DownwardAPI != nil {
		d := *v.DownwardAPI
		d.Items = files(d.Items)
		v.DownwardAPI = &d
	}
	if v.Projected != nil {
		p := *v.Projected
		p.Sources = slices.Clone(p.Sources)
		for i, src := range p.Sources {
			if src.DownwardAPI != nil {
				d := *src.DownwardAPI
				d.Items = files(d.Items)
				p.Sources[i].DownwardAPI = &d
			}
		}
		v.Projected = &p
	}
	return v
}

// withoutInPlace are cs without what a pod's containers can take in
// place: their images, memcached's resources.
func withoutInPlace(cs []corev1ac.ContainerApplyConfiguration) []corev1ac.ContainerApplyConfiguration {
	out := make([]corev1ac.ContainerApplyConfiguration, len(cs))
	for i, c := range cs {
		c.Image = nil
		if c.Name != nil && *c.Name == ContainerName {
			c.Resources = nil
		}
		out[i] = c
	}
	return out
}
