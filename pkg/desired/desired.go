// Package desired builds the objects a Memcached should have, as typed apply
// configurations holding only the fields the operator means to own.
//
// Its functions are pure: they take values and return apply configurations,
// with no client, clock or global state, so that the same Memcached always
// gives the same intent.
package desired

import (
	"strconv"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

const (
	// labelName, LabelInstance and LabelManagedBy are the recommended
	// Kubernetes labels the operator puts on what it creates.
	labelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelMemcached names the Memcached (as LabelInstance does) on
	// everything the operator makes for it and on its pods. It is the
	// project's own, and alone selects a Memcached's pods: the recommended
	// labels are for people and tools, and another chart in the namespace
	// may put the same on its own pods.
	LabelMemcached = "cache.example.com/memcached"

	// appName is the value of labelName.
	appName = "memcached"
	// ManagedBy is the value of LabelManagedBy; the operator caches only
	// objects that carry it.
	ManagedBy = "memcached-operator"

	// ContainerName is the name of the memcached container.
	ContainerName = "memcached"
	// PortName is the name of the memcached container port.
	PortName = "memcached"

	// DefaultImage is the memcached image the operator uses for a Memcached
	// without spec.image, unless its --memcached-image flag or the
	// MEMCACHED_IMAGE environment variable says otherwise.
	DefaultImage = "memcached:1.6.26-alpine3.19"

	// DefaultExporterImage is the Prometheus memcached exporter image of
	// a Memcached with spec.monitoring enabled, unless the operator's
	// --exporter-image flag or the EXPORTER_IMAGE environment variable says
	// otherwise.
	DefaultExporterImage = "prom/memcached-exporter:v0.14.4"

	// ExporterContainerName is the name of the exporter container, and
	// MetricsPortName the name of its port, on the pods and the Service.
	ExporterContainerName = "exporter"
	MetricsPortName       = "metrics"
	// MetricsPort is the exporter's port.
	MetricsPort int32 = 9150

	// DefaultContainerPort is the port used when spec.containerPort is unset
	// (the CRD defaults it, so this matters only to objects the apiserver
	// has not defaulted).
	DefaultContainerPort int32 = 11211

	// probePeriodSeconds and friends tune the TCP probes on the memcached port.
	probePeriodSeconds           = 10
	readinessInitialDelaySeconds = 1
	livenessInitialDelaySeconds  = 10
	livenessFailureThreshold     = 3
	// preStopSleepSeconds is how long a memcached pod keeps serving after
	// it is told to stop: the time for the endpoints controller to drop it
	// from the Service and for clients to stop sending to it.
	preStopSleepSeconds = 10
	// terminationGracePeriodSeconds leaves memcached time to stop after
	// the preStop sleep.
	terminationGracePeriodSeconds = 30

	// tlsVolume and authVolume are the volumes of the Secrets of spec.tls
	// and spec.auth, mounted read-only at tlsDir and authDir.
	tlsVolume  = "tls"
	tlsDir     = "/etc/memcached/tls"
	authVolume = "auth"
	authDir    = "/etc/memcached/auth"
	// servedVolume is the memory-backed volume the reloader fills with the
	// files it checked, from which alone memcached reads them (servedDir),
	// in the pods that run the reloader; servedSize bounds it.
	servedVolume = "served"
	servedDir    = "/etc/memcached/served"
	servedSize   = "1Mi"
	// authFile is the authentication file's name in authDir, whatever the
	// Secret's key.
	authFile = "authfile"
	// secretFileMode lets the pods' users read the mounted Secrets through
	// the pod's fsGroup, and no one else.
	secretFileMode int32 = 0o440

	// AnnotationTLSDigest and AnnotationAuthDigest, on the pod template of
	// an operator that runs no reloader (Images.Reloader empty), are
	// digests of the Secret content the pods mount: new content is a new
	// template, which rolls the pods.
	AnnotationTLSDigest  = "cache.example.com/tls-digest"
	AnnotationAuthDigest = "cache.example.com/auth-digest"
	// AnnotationRestartedFor, on the pod template, is the digest of the
	// Secret content (SecretDigests.Combined) that a pod could not load in
	// place: the pods were restarted to mount it. Absent until that
	// happens.
	AnnotationRestartedFor = "cache.example.com/restarted-for"
	// AnnotationPodShape, on the pod template of pods that run memcached
	// warm, is a digest of the template but its containers' images: a
	// pod whose shape is the template's is brought to it in place, by
	// setting its images (see StatefulSet).
	AnnotationPodShape = "cache.example.com/pod-shape"
	// AnnotationPodMetadataKeys, on the same templates, names the keys of
	// spec.podLabels and spec.podAnnotations (PodMetadataKeys, as JSON):
	// a pod taking another template in place drops those its own names
	// and the template's no longer does, and no other.
	AnnotationPodMetadataKeys = "cache.example.com/pod-metadata-keys"
	// AnnotationRestartingFrom, on a pod, is the ID of the memcached
	// container the operator restarted in place for new images, until the
	// restart is confirmed; AnnotationWarmRestart then says what memcached
	// kept, as the warm runner read it from memcached.
	// For new settings (AnnotationMemcachedSettings) it is
	// RestartingForSettings and the time of the change: memcached restarts
	// in its container, which stays.
	AnnotationRestartingFrom = "cache.example.com/restarting-from"
	AnnotationWarmRestart    = "cache.example.com/warm-restart"
	// AnnotationMembershipVersion, on a pod, is the version of the
	// membership (the membership ConfigMap's) the operator last told the
	// pod of. The kubelet writes a ConfigMap's new content to the pods
	// that mount it at its periodic sync of each pod (a minute or more),
	// and at once when the pod itself changes: setting this annotation
	// when the membership changes makes every pod serve it within moments.
	AnnotationMembershipVersion = "cache.example.com/membership-version"
	// AnnotationMembershipSeal, on a pod, is the discovery.Seal of the
	// membership and the move the operator last told the pod of, set with
	// AnnotationMembershipVersion. The pod mounts it beside the membership
	// ConfigMap (one projected volume, which the kubelet writes whole),
	// and its discovery container serves a membership, and follows a
	// move, only where the seal vouches for it: the ConfigMap is writable
	// by whoever has ConfigMap rights in the namespace, the pod only by
	// whoever could run anything in it.
	AnnotationMembershipSeal = "cache.example.com/membership-seal"
	// AnnotationMembershipRetold, on a pod, names the step of a move of
	// keys that waited for the pod's word and how many times the operator
	// told the pod of it again ("8 copy 2"): each change of the pod has the
	// kubelet write its volumes anew (scope.retell).
	AnnotationMembershipRetold = "cache.example.com/membership-retold"
	// AnnotationSecretsDigest, on a pod whose reloader renews the Secret
	// content in place, is the digest of that content
	// (SecretDigests.Combined) the operator last told the pod of: set when
	// a Secret changes, so that the kubelet writes the new content to the
	// pod at once, as AnnotationMembershipVersion does for the membership.
	AnnotationSecretsDigest = "cache.example.com/secrets-digest"
	// AnnotationMemcachedSettings, on the pod template of pods that run
	// memcached warm, holds the settings memcached can take on a restart in
	// its container (ContainerSettings: threads, connections, verbosity,
	// which a warm restart keeps the items across, and the maximum item
	// size, which it does not), one flag per line. The warm runner reads
	// them from a file (the downward API) rather than from the container's
	// command line, which a pod cannot change: set on a pod, new settings
	// restart memcached in its container.
	AnnotationMemcachedSettings = "cache.example.com/memcached-settings"
	// RestartingForSettings starts AnnotationRestartingFrom when memcached
	// restarts in its container for new settings.
	RestartingForSettings = "settings since "

	// ReloaderContainerName is the container that has memcached load new
	// Secret content in place (cmd/reloader), in the pods of a Memcached
	// with TLS or authentication.
	ReloaderContainerName = "reloader"
	// ReloaderPrepareContainerName is the init container in which the
	// reloader checks the mounted Secrets and puts them where memcached
	// reads them, before memcached starts.
	ReloaderPrepareContainerName = "reloader-prepare"
	// reloaderCommand is the reloader's path in the operator's image.
	reloaderCommand = "/reloader"

	// exporterUser is the exporter image's user (nobody), as a number for
	// runAsNonRoot.
	exporterUser = 65534
	// memcachedUser is the memcached image's user, as a number: kubelet
	// cannot prove a named user is not root.
	memcachedUser = 1001

	// The reloader's resources: it reads a few files each second and
	// otherwise sleeps (docs/benchmarks-cache.md has what it used).
	reloaderCPURequest = "5m"
	reloaderMemory     = "32Mi"
)

// Images are the images of a Memcached's pods when its spec names none:
// the operator's defaults.
type Images struct {
	// Memcached is the memcached image of a Memcached without spec.image.
	Memcached string
	// Exporter is the Prometheus memcached exporter image.
	Exporter string
	// Reloader is the image of the reloader (the operator's own). Empty:
	// the pods run none, and new Secret content rolls them.
	Reloader string
}

// Image is the memcached image of m: spec.image, or the default when unset.
func (i Images) Image(m *cachev1alpha1.Memcached) string {
	if m.Spec.Image != "" {
		return m.Spec.Image
	}
	return i.Memcached
}

// RunsExporter tells whether m's pods run the exporter.
func RunsExporter(m *cachev1alpha1.Memcached) bool {
	return m.Spec.Monitoring != nil && m.Spec.Monitoring.Enabled
}

func port(m *cachev1alpha1.Memcached) int32 {
	if m.Spec.ContainerPort != nil {
		return *m.Spec.ContainerPort
	}
	return DefaultContainerPort
}

// Replicas is the number of pods m asks for (spec.size, 1 when unset as the CRD defaults it).
func Replicas(m *cachev1alpha1.Memcached) int32 {
	if m.Spec.Size != nil {
		return *m.Spec.Size
	}
	return 1
}

// stringMap is m with its values as plain strings, as the core API's maps
// hold them; never nil.
func stringMap[V ~string](m map[string]V) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }
