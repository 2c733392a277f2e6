// Package desired builds the objects a Memcached should have, as typed apply
// configurations holding only the fields the operator means to own.
//
// Its functions are pure: they take values and return apply configurations,
// with no client, clock or global state, so that the same Memcached always
// gives the same intent.
package desired

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"path"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/jsonconv"
	"github.com/example/memcached-operator/pkg/secrets"
)

const (
	// LabelName, LabelInstance and LabelManagedBy are the recommended
	// Kubernetes labels the operator puts on what it creates.
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"

	// AppName is the value of LabelName.
	AppName = "memcached"
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

	// TLSVolume and AuthVolume are the volumes of the Secrets of spec.tls
	// and spec.auth, mounted read-only at TLSDir and AuthDir.
	TLSVolume  = "tls"
	TLSDir     = "/etc/memcached/tls"
	AuthVolume = "auth"
	AuthDir    = "/etc/memcached/auth"
	// authFile is the authentication file's name in AuthDir, whatever the
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

	// ReloaderContainerName is the container that has memcached load new
	// Secret content in place (cmd/reloader), in the pods of a Memcached
	// with TLS or authentication.
	ReloaderContainerName = "reloader"
	// reloaderCommand is the reloader's path in the operator's image.
	reloaderCommand = "/reloader"

	// exporterUser is the exporter image's user (nobody), as a number for
	// runAsNonRoot.
	exporterUser = 65534
	// memcachedUser is the memcached image's user, as a number: kubelet
	// cannot prove a named user is not root.
	memcachedUser = 1001

	// The reloader's resources: it reads a few files each second and
	// otherwise sleeps (docs/security.md has what it measured).
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

// SecretDigests are digests of the Secret content the pods of a
// Memcached mount (the keys TLSKeys and AuthKey name). Empty when not
// mounted. Without a reloader a new digest is a new pod template, which
// rolls the pods; with one, the pods load new content in place.
type SecretDigests struct {
	TLS  string
	Auth string
	// RestartedFor is the Combined digest the pods were last restarted
	// for, when a reload in place failed; empty if never.
	RestartedFor string
}

// Combined is one digest of all the Secret content the pods mount.
func (d SecretDigests) Combined() string {
	h := sha256.Sum256([]byte("tls=" + d.TLS + "\nauth=" + d.Auth + "\n"))
	return hex.EncodeToString(h[:])
}

// Reloads tells whether m's pods run the reloader: they mount a Secret and
// the operator has the reloader's image.
func Reloads(m *cachev1alpha1.Memcached, images Images) bool {
	return images.Reloader != "" && (m.Spec.TLS != nil || m.Spec.Auth != nil)
}

// TLSKeys are the keys of the spec.tls Secret that m's pods mount:
// the certificate chain and key, and the client CA when client
// certificates are asked for.
func TLSKeys(m *cachev1alpha1.Memcached) []string {
	if m.Spec.TLS == nil {
		return nil
	}
	keys := []string{secrets.CertKey, secrets.KeyKey}
	if verifiesClients(m) {
		keys = append(keys, secrets.CAKey)
	}
	return keys
}

// AuthKey is the key of the spec.auth Secret that m's pods mount; empty
// without spec.auth.
func AuthKey(m *cachev1alpha1.Memcached) string {
	if m.Spec.Auth == nil {
		return ""
	}
	if m.Spec.Auth.Key == "" {
		return authFile // the CRD's default
	}
	return m.Spec.Auth.Key
}

func verifiesClients(m *cachev1alpha1.Memcached) bool {
	return m.Spec.TLS != nil && m.Spec.TLS.ClientCertificates != "" && m.Spec.TLS.ClientCertificates != cachev1alpha1.ClientCertificatesNone
}

// sslVerifyModes are memcached's ssl_verify_mode values.
var sslVerifyModes = map[cachev1alpha1.ClientCertificates]int{
	cachev1alpha1.ClientCertificatesRequest: 1,
	cachev1alpha1.ClientCertificatesRequire: 2,
}

// InstanceLabelValue is the value of LabelInstance for a Memcached: its name
// when that is a valid label value, otherwise a shortened name with a hash
// of the full name. The CRD admits only names of at most 63 characters, which
// are always valid label values; the fallback keeps the builder total for
// any input.
func InstanceLabelValue(name string) string {
	if len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := hex.EncodeToString(sum[:])[:10]
	prefix := name
	if max := validation.LabelValueMaxLength - len(suffix) - 1; len(prefix) > max {
		prefix = prefix[:max]
	}
	// A label value must start and end with an alphanumeric character;
	// object names may contain dots that a cut could leave at the end.
	for len(prefix) > 0 && !isAlphanumeric(prefix[len(prefix)-1]) {
		prefix = prefix[:len(prefix)-1]
	}
	return prefix + "-" + suffix
}

func isAlphanumeric(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// SelectorLabels are the labels that select a Memcached's pods. They are
// derived from the name only, which never changes, because a Deployment's
// selector is immutable.
func SelectorLabels(m *cachev1alpha1.Memcached) map[string]string {
	return map[string]string{
		LabelName:     AppName,
		LabelInstance: InstanceLabelValue(m.Name),
	}
}

// Labels are the labels of every object the operator creates for a Memcached.
func Labels(m *cachev1alpha1.Memcached) map[string]string {
	l := SelectorLabels(m)
	l[LabelManagedBy] = ManagedBy
	return l
}

// OwnerReference makes m the controller of an object.
func OwnerReference(m *cachev1alpha1.Memcached) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(cachev1alpha1.SchemeGroupVersion.String()).
		WithKind(cachev1alpha1.Kind).
		WithName(m.Name).
		WithUID(m.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// Image is the memcached image of m: spec.image, or the default when unset.
func (i Images) Image(m *cachev1alpha1.Memcached) string {
	if m.Spec.Image != "" {
		return m.Spec.Image
	}
	return i.Memcached
}

// Monitored tells whether m runs the exporter.
func Monitored(m *cachev1alpha1.Memcached) bool {
	return m.Spec.Monitoring != nil && m.Spec.Monitoring.Enabled
}

// Command is memcached's command line for m. Settings left unset in the
// spec are left out, so memcached's own defaults apply.
func Command(m *cachev1alpha1.Memcached) []string {
	cmd := []string{"memcached", "--port=" + strconv.Itoa(int(port(m)))}
	if v := m.Spec.Verbosity; v != nil && *v > 0 {
		cmd = append(cmd, "-"+strings.Repeat("v", int(*v)))
	}
	if v := m.Spec.MemoryLimitMiB; v != nil {
		cmd = append(cmd, "--memory-limit="+strconv.Itoa(int(*v)))
	}
	if v := m.Spec.MaxConnections; v != nil {
		cmd = append(cmd, "--conn-limit="+strconv.Itoa(int(*v)))
	}
	if v := m.Spec.Threads; v != nil {
		cmd = append(cmd, "--threads="+strconv.Itoa(int(*v)))
	}
	if v := m.Spec.MaxItemSize; v != "" {
		// The CRD admits only whole Ki, Mi or Gi; memcached reads bytes.
		if q, err := resource.ParseQuantity(v); err == nil {
			cmd = append(cmd, "--max-item-size="+strconv.FormatInt(q.Value(), 10))
		}
	}
	if m.Spec.TLS != nil {
		opts := "ssl_chain_cert=" + path.Join(TLSDir, secrets.CertKey) + ",ssl_key=" + path.Join(TLSDir, secrets.KeyKey)
		if verifiesClients(m) {
			opts += ",ssl_ca_cert=" + path.Join(TLSDir, secrets.CAKey) + ",ssl_verify_mode=" + strconv.Itoa(sslVerifyModes[m.Spec.TLS.ClientCertificates])
		}
		cmd = append(cmd, "--enable-ssl", "--extended="+opts)
	}
	if m.Spec.Auth != nil {
		cmd = append(cmd, "--auth-file="+path.Join(AuthDir, authFile))
	}
	return cmd
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
	case Reloads(m, images):
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
		WithOwnerReferences(OwnerReference(m)).
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

// stringMap is m with its values as plain strings, as the core API's maps
// hold them; never nil.
func stringMap[V ~string](m map[string]V) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

func podSpec(m *cachev1alpha1.Memcached, images Images) *corev1ac.PodSpecApplyConfiguration {
	ps := corev1ac.PodSpec().
		WithAutomountServiceAccountToken(false).
		WithTerminationGracePeriodSeconds(terminationGracePeriodSeconds).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithContainers(container(m, images))
	if Monitored(m) {
		ps.WithContainers(exporter(m, images))
	}
	if Reloads(m, images) {
		ps.WithContainers(reloader(m, images))
		if m.Spec.Auth != nil {
			// The reloader signals memcached to read its authentication
			// file again: it must see memcached's process.
			ps.WithShareProcessNamespace(true)
		}
	}
	if m.Spec.TLS != nil {
		ps.WithVolumes(secretVolume(TLSVolume, m.Spec.TLS.SecretName, TLSKeys(m)...))
	}
	if m.Spec.Auth != nil {
		v := secretVolume(AuthVolume, m.Spec.Auth.SecretName)
		v.Secret.WithItems(corev1ac.KeyToPath().WithKey(AuthKey(m)).WithPath(authFile))
		ps.WithVolumes(v)
	}
	if len(ps.Volumes) > 0 {
		// The mounted Secrets belong to this group, which every container
		// of the pod joins.
		ps.SecurityContext.WithFSGroup(memcachedUser)
	}
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
			WithMatchLabelKeys(appsv1.DefaultDeploymentUniqueLabelKey))
	}
	return ps
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

func container(m *cachev1alpha1.Memcached, images Images) *corev1ac.ContainerApplyConfiguration {
	probe := func() *corev1ac.ProbeApplyConfiguration {
		return corev1ac.Probe().
			WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromString(PortName))).
			WithPeriodSeconds(probePeriodSeconds)
	}
	c := corev1ac.Container().
		WithName(ContainerName).
		WithImage(images.Image(m)).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		WithCommand(Command(m)...).
		// When memcached exits with an error, the end of its log becomes
		// the termination message, which the Memcached's status quotes.
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError).
		WithPorts(corev1ac.ContainerPort().
			WithName(PortName).
			WithContainerPort(port(m)).
			WithProtocol(corev1.ProtocolTCP)).
		WithReadinessProbe(probe().WithInitialDelaySeconds(readinessInitialDelaySeconds)).
		WithLivenessProbe(probe().
			WithInitialDelaySeconds(livenessInitialDelaySeconds).
			WithFailureThreshold(livenessFailureThreshold)).
		// The kubelet's own sleep: the memcached image needs no shell.
		WithLifecycle(corev1ac.Lifecycle().
			WithPreStop(corev1ac.LifecycleHandler().
				WithSleep(corev1ac.SleepAction().WithSeconds(preStopSleepSeconds)))).
		WithSecurityContext(restricted(memcachedUser))
	if r := resources(m.Spec.Resources); r != nil {
		c.WithResources(r)
	}
	if m.Spec.TLS != nil {
		c.WithVolumeMounts(mount(TLSVolume, TLSDir))
	}
	if m.Spec.Auth != nil {
		c.WithVolumeMounts(mount(AuthVolume, AuthDir))
	}
	return c
}

// exporter is the Prometheus memcached exporter's container: it reads
// memcached's stats over the pod's loopback and serves them on the port
// named MetricsPortName.
//
// With TLS, it connects over TLS without verifying memcached's certificate:
// the connection never leaves the pod, and the certificate's names are
// the Service's, not localhost. When memcached asks clients for a
// certificate, the exporter presents memcached's own (which must then
// allow client authentication; the operator checks that it does).
func exporter(m *cachev1alpha1.Memcached, images Images) *corev1ac.ContainerApplyConfiguration {
	args := []string{
		"--memcached.address=localhost:" + strconv.Itoa(int(port(m))),
		"--web.listen-address=:" + strconv.Itoa(int(MetricsPort)),
	}
	if m.Spec.TLS != nil {
		args = append(args, "--memcached.tls.enable", "--memcached.tls.insecure-skip-verify")
	}
	if verifiesClients(m) {
		args = append(args,
			"--memcached.tls.cert-file="+path.Join(TLSDir, secrets.CertKey),
			"--memcached.tls.key-file="+path.Join(TLSDir, secrets.KeyKey))
	}
	c := corev1ac.Container().
		WithName(ExporterContainerName).
		WithImage(images.Exporter).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		WithArgs(args...).
		WithPorts(corev1ac.ContainerPort().
			WithName(MetricsPortName).
			WithContainerPort(MetricsPort).
			WithProtocol(corev1.ProtocolTCP)).
		WithSecurityContext(restricted(exporterUser))
	if r := resources(m.Spec.Monitoring.Resources); r != nil {
		c.WithResources(r)
	}
	if verifiesClients(m) {
		c.WithVolumeMounts(mount(TLSVolume, TLSDir))
	}
	return c
}

// reloader is the container that has memcached load new Secret content in
// place (cmd/reloader). It runs as memcached's user, mounts what memcached
// mounts and nothing else, and makes no request to the apiserver (the pod
// has no token).
func reloader(m *cachev1alpha1.Memcached, images Images) *corev1ac.ContainerApplyConfiguration {
	args := []string{"--memcached-address=localhost:" + strconv.Itoa(int(port(m)))}
	c := corev1ac.Container().
		WithName(ReloaderContainerName).
		WithImage(images.Reloader).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		WithCommand(reloaderCommand).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(reloaderCPURequest),
				corev1.ResourceMemory: resource.MustParse(reloaderMemory),
			}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(reloaderMemory)})).
		WithSecurityContext(restricted(memcachedUser))
	if m.Spec.TLS != nil {
		args = append(args, "--tls-dir="+TLSDir, "--server-name="+ServiceHost(m.Name, m.Namespace))
		if verifiesClients(m) {
			args = append(args, "--client-certificate")
		}
		c.WithVolumeMounts(mount(TLSVolume, TLSDir))
	}
	if m.Spec.Auth != nil {
		args = append(args, "--auth-file="+path.Join(AuthDir, authFile))
		c.WithVolumeMounts(mount(AuthVolume, AuthDir))
	}
	return c.WithArgs(args...)
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

// Service is the headless Service of m: named after m, selecting exactly
// m's pods, with the memcached port named PortName. Being headless, its name
// resolves to the address of every ready pod, which is what memcached
// clients want (they spread keys across servers themselves).
//
// With monitoring on, it exposes the exporter's port too, which a
// ServiceMonitor scrapes.
func Service(m *cachev1alpha1.Memcached) *corev1ac.ServiceApplyConfiguration {
	spec := corev1ac.ServiceSpec().
		WithClusterIP(corev1.ClusterIPNone).
		WithSelector(SelectorLabels(m)).
		WithPorts(corev1ac.ServicePort().
			WithName(PortName).
			WithProtocol(corev1.ProtocolTCP).
			WithPort(port(m)).
			WithTargetPort(intstr.FromString(PortName)))
	if Monitored(m) {
		spec.WithPorts(corev1ac.ServicePort().
			WithName(MetricsPortName).
			WithProtocol(corev1.ProtocolTCP).
			WithPort(MetricsPort).
			WithTargetPort(intstr.FromString(MetricsPortName)))
	}
	return corev1ac.Service(m.Name, m.Namespace).
		WithLabels(Labels(m)).
		WithOwnerReferences(OwnerReference(m)).
		WithSpec(spec)
}

// Address is where a client in the cluster reaches a Service's port:
// "<name>.<namespace>.svc:<port>", resolved through the cluster's DNS
// search path whatever the cluster domain.
func Address(name, namespace string, port int32) string {
	return ServiceHost(name, namespace) + ":" + strconv.Itoa(int(port))
}

// ServiceHost is the name clients in the cluster reach a Service by,
// "<name>.<namespace>.svc", and the name memcached's certificate must
// carry for clients that verify it.
func ServiceHost(name, namespace string) string {
	return name + "." + namespace + ".svc"
}

// WantsPodDisruptionBudget tells whether m should have a PodDisruptionBudget:
// only with more than one pod. With one, a budget of maxUnavailable 1 guards
// nothing, and one of 0 would block every node drain.
func WantsPodDisruptionBudget(m *cachev1alpha1.Memcached) bool {
	return Replicas(m) > 1
}

// PodDisruptionBudget lets voluntary disruptions (node drains) take at most
// one of m's pods at a time, so that at most one slice of the cache is cold.
func PodDisruptionBudget(m *cachev1alpha1.Memcached) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	return policyv1ac.PodDisruptionBudget(m.Name, m.Namespace).
		WithLabels(Labels(m)).
		WithOwnerReferences(OwnerReference(m)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMaxUnavailable(intstr.FromInt32(1)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m))))
}
