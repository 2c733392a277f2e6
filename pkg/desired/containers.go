package desired

import (
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/example/memcached-operator/pkg/material"
	"github.com/example/memcached-operator/pkg/settings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// Command is memcached's command line for m, reading the mounted Secrets.
// Settings left unset in the spec are left out, so memcached's own defaults
// apply.
func Command(m *cachev1alpha1.Memcached) []string {
	return command(m, tlsDir, path.Join(authDir, authFile))
}

// command is memcached's command line for m, reading its certificate, key
// and CA from tlsAt and its authentication file at authAt.
func command(m *cachev1alpha1.Memcached, tlsAt, authAt string) []string {
	cmd := []string{"memcached", "--port=" + strconv.Itoa(int(port(m)))}
	cmd = append(cmd, ContainerSettings(m)...)
	if m.Spec.TLS != nil {
		opts := "ssl_chain_cert=" + path.Join(tlsAt, material.CertKey) + ",ssl_key=" + path.Join(tlsAt, material.KeyKey)
		if verifiesClients(m) {
			opts += ",ssl_ca_cert=" + path.Join(tlsAt, material.CAKey) + ",ssl_verify_mode=" + strconv.Itoa(sslVerifyModes[m.Spec.TLS.ClientCertificates])
		}
		cmd = append(cmd, "--enable-ssl", "--extended="+opts)
	}
	if m.Spec.Auth != nil {
		cmd = append(cmd, "--auth-file="+authAt)
	}
	return cmd
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
		WithCommand(memcachedCommand(m, images)...).
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
		WithLifecycle(corev1ac.Lifecycle().WithPreStop(memcachedPreStop(m, images))).
		WithSecurityContext(restricted(memcachedUser))
	if r := resources(m.Spec.Resources); r != nil {
		c.WithResources(r)
	}
	if RunsWarm(m, images) {
		c.WithVolumeMounts(warmMounts()...)
	}
	if HandsOffOnDeletion(m, images) {
		c.WithVolumeMounts(handOffMount())
	}
	switch {
	case RunsReloader(m, images):
		// Only what the reloader checked: never the Secrets themselves.
		c.WithVolumeMounts(mount(servedVolume, servedDir))
	default:
		if m.Spec.TLS != nil {
			c.WithVolumeMounts(mount(tlsVolume, tlsDir))
		}
		if m.Spec.Auth != nil {
			c.WithVolumeMounts(mount(authVolume, authDir))
		}
	}
	return c
}

// memcachedCommand is the memcached container's command line in m's pods:
// with the reloader, reading the served directory it fills; when memcached
// runs warm, under the warm runner.
func memcachedCommand(m *cachev1alpha1.Memcached, images Images) []string {
	cmd := Command(m)
	if RunsReloader(m, images) {
		cmd = command(m, servedDir, path.Join(servedDir, authFile))
	}
	if RunsWarm(m, images) {
		// These settings come from the pod's annotation
		// (AnnotationMemcachedSettings).
		settings := ContainerSettings(m)
		return warmCommandLine(slices.DeleteFunc(cmd, func(a string) bool { return slices.Contains(settings, a) }))
	}
	return cmd
}

// ContainerSettings are the flags of m's memcached command line that a
// restart of memcached in its container can take: those memcached keeps
// its items across a warm restart with (verbosity, the connection limit,
// the threads), and the memory limit and the maximum item size, with which
// it starts empty (NotKeptSettings). The others (the port, TLS,
// authentication) need a new pod: what the pod mounts.
//
// A memory limit is taken in place only where the pod's memory volume
// holds it (MemoryVolumeSize): a pod's volumes cannot grow.
func ContainerSettings(m *cachev1alpha1.Memcached) []string {
	var kept []string
	if v := m.Spec.MemoryLimitMiB; v != nil {
		kept = append(kept, memoryLimitSetting+strconv.Itoa(int(*v)))
	}
	if v := m.Spec.Verbosity; v != nil && *v > 0 {
		kept = append(kept, "-"+strings.Repeat("v", int(*v)))
	}
	if v := m.Spec.MaxConnections; v != nil {
		kept = append(kept, settings.ConnLimit+strconv.Itoa(int(*v)))
	}
	if v := m.Spec.Threads; v != nil {
		kept = append(kept, settings.Threads+strconv.Itoa(int(*v)))
	}
	if v := m.Spec.MaxItemSize; v != "" {
		// The CRD admits only whole Ki, Mi or Gi; memcached reads bytes.
		if q, err := resource.ParseQuantity(v); err == nil {
			kept = append(kept, maxItemSizeSetting+strconv.FormatInt(q.Value(), 10))
		}
	}
	return kept
}

// The flags of ContainerSettings that memcached keeps no item across: a
// new memory limit or maximum item size restarts it empty.
const (
	memoryLimitSetting = settings.MemoryLimit
	maxItemSizeSetting = settings.MaxItemSize
)

// NotKept names what, of two lists of ContainerSettings, memcached keeps
// no item across a restart from the first to the second: "its memory
// limit", "its maximum item size", both, or "" when it keeps its items.
// A flag left out is memcached's default.
func NotKept(from, to []string) string {
	var changed []string
	for _, s := range []struct{ flag, name, unset string }{
		{memoryLimitSetting, "its memory limit", strconv.Itoa(memcachedDefaultMiB)},
		{maxItemSizeSetting, "its maximum item size", strconv.Itoa(memcachedDefaultItemSize)},
	} {
		value := func(flags []string) string {
			for _, f := range flags {
				if v, ok := strings.CutPrefix(f, s.flag); ok {
					return v
				}
			}
			return s.unset
		}
		if value(from) != value(to) {
			changed = append(changed, s.name)
		}
	}
	return strings.Join(changed, " and ")
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
			"--memcached.tls.cert-file="+path.Join(tlsDir, material.CertKey),
			"--memcached.tls.key-file="+path.Join(tlsDir, material.KeyKey))
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
		c.WithVolumeMounts(mount(tlsVolume, tlsDir))
	}
	return c
}

// reloader is the container that has memcached load new Secret content in
// place (cmd/reloader). It runs as memcached's user, mounts the Secrets
// memcached uses and the served directory it fills for memcached, and makes
// no request to the apiserver (the pod has no token).
func reloader(m *cachev1alpha1.Memcached, images Images) *corev1ac.ContainerApplyConfiguration {
	return reloaderContainer(m, images, ReloaderContainerName, "--memcached-address=localhost:"+strconv.Itoa(int(port(m))))
}

// reloaderPrepare is the pods' init container: the reloader checks the
// mounted Secrets and copies them to the served directory, before memcached
// starts; a pod whose Secrets are unfit does not start, and says why.
func reloaderPrepare(m *cachev1alpha1.Memcached, images Images) *corev1ac.ContainerApplyConfiguration {
	return reloaderContainer(m, images, ReloaderPrepareContainerName, "--prepare")
}

// reloaderContainer is the reloader as the container name, with args
// before the files' flags: it mounts the Secrets read-only and the served
// directory read-write.
func reloaderContainer(m *cachev1alpha1.Memcached, images Images, name string, args ...string) *corev1ac.ContainerApplyConfiguration {
	args = append(args, "--served-dir="+servedDir)
	c := corev1ac.Container().
		WithName(name).
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
		args = append(args, "--tls-dir="+tlsDir, "--server-name="+ServiceHost(m.Name, m.Namespace))
		if verifiesClients(m) {
			args = append(args, "--client-certificate")
		}
		c.WithVolumeMounts(mount(tlsVolume, tlsDir))
	}
	if m.Spec.Auth != nil {
		args = append(args, "--auth-file="+path.Join(authDir, authFile))
		c.WithVolumeMounts(mount(authVolume, authDir))
	}
	c.WithVolumeMounts(corev1ac.VolumeMount().WithName(servedVolume).WithMountPath(servedDir))
	return c.WithArgs(args...)
}
