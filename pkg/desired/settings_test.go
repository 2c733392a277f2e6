package desired

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/settings"
)

var testImages = Images{Memcached: "memcached:1", Exporter: "exporter:1"}

func TestCommandCarriesTheCacheSettings(t *testing.T) {
	tests := []struct {
		name string
		spec cachev1alpha1.MemcachedSpec
		want []string
	}{
		{"memcached's defaults", cachev1alpha1.MemcachedSpec{}, []string{"memcached", "--port=11211"}},
		{"verbosity 0 adds nothing", cachev1alpha1.MemcachedSpec{Verbosity: ptr.To[int32](0)}, []string{"memcached", "--port=11211"}},
		{"verbosity 1", cachev1alpha1.MemcachedSpec{Verbosity: ptr.To[int32](1)}, []string{"memcached", "--port=11211", "-v"}},
		{"verbosity 2", cachev1alpha1.MemcachedSpec{Verbosity: ptr.To[int32](2)}, []string{"memcached", "--port=11211", "-vv"}},
		{"item size in bytes", cachev1alpha1.MemcachedSpec{MaxItemSize: "2Mi"}, []string{"memcached", "--port=11211", "--max-item-size=2097152"}},
		{"item size of 512Ki", cachev1alpha1.MemcachedSpec{MaxItemSize: "512Ki"}, []string{"memcached", "--port=11211", "--max-item-size=524288"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(Command(memcached("cache", tt.spec))).To(Equal(tt.want))
		})
	}
}

// Each pod is a slot named under the headless Service; a change rolls one
// slot at a time, and a stopping pod keeps serving while endpoints drop it.
func TestSlotsRollOneAtATime(t *testing.T) {
	g := NewWithT(t)
	d := StatefulSet(memcached("cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)}), testImages, SecretDigests{})
	g.Expect(*d.Spec.ServiceName).To(Equal("cache"), "the headless Service names the slots")
	g.Expect(*d.Spec.PodManagementPolicy).To(Equal(appsv1.ParallelPodManagement), "slots do not wait for each other on a scale")
	g.Expect(*d.Spec.UpdateStrategy.Type).To(Equal(appsv1.RollingUpdateStatefulSetStrategyType))
	g.Expect(d.Spec.UpdateStrategy.RollingUpdate).To(BeNil(), "one slot at a time, every slot")
	g.Expect(SlotHost("cache", "ns", 2)).To(Equal("cache-2.cache.ns.svc"))
	pod := d.Spec.Template.Spec
	sleep := pod.Containers[0].Lifecycle.PreStop.Sleep
	g.Expect(sleep).NotTo(BeNil(), "the kubelet's sleep action: no shell needed")
	g.Expect(pod.Containers[0].Lifecycle.PreStop.Exec).To(BeNil())
	g.Expect(*pod.TerminationGracePeriodSeconds).To(BeNumerically(">", *sleep.Seconds), "memcached gets time to stop after the sleep")
	// The figures the README promises, pinned here: a shorter sleep lets
	// clients send to a pod that has stopped before the endpoints drop it.
	g.Expect(*sleep.Seconds).To(Equal(int64(10)), "a stopping pod keeps serving for 10 s")
	g.Expect(*pod.TerminationGracePeriodSeconds).To(Equal(int64(30)), "within a 30 s grace period")
}

func TestPodSettings(t *testing.T) {
	g := NewWithT(t)
	m := memcached("cache", cachev1alpha1.MemcachedSpec{
		ImagePullSecrets:  []cachev1alpha1.ImagePullSecret{{Name: "registry"}},
		PriorityClassName: "cache-critical",
		PodLabels:         map[string]cachev1alpha1.LabelValue{"team": "payments", LabelInstance: "not-this"},
		PodAnnotations:    map[string]cachev1alpha1.AnnotationValue{"example.com/owner": "payments"},
	})
	d := StatefulSet(m, testImages, SecretDigests{})
	tmpl := d.Spec.Template
	g.Expect(tmpl.Labels).To(HaveKeyWithValue("team", "payments"))
	g.Expect(tmpl.Labels).To(HaveKeyWithValue(LabelInstance, "cache"), "the selector's labels win")
	g.Expect(tmpl.Annotations).To(Equal(map[string]string{"example.com/owner": "payments"}))
	g.Expect(*tmpl.Spec.ImagePullSecrets[0].Name).To(Equal("registry"))
	g.Expect(*tmpl.Spec.PriorityClassName).To(Equal("cache-critical"))
	g.Expect(d.Labels).NotTo(HaveKey("team"), "pod labels are the pods' only")

	plain := StatefulSet(memcached("cache", cachev1alpha1.MemcachedSpec{}), testImages, SecretDigests{}).Spec.Template
	g.Expect(plain.Annotations).To(BeNil(), "nothing sent when the spec has none")
	g.Expect(plain.Spec.ImagePullSecrets).To(BeEmpty())
	g.Expect(plain.Spec.PriorityClassName).To(BeNil())
}

func TestMonitoringAddsTheExporterAndItsPort(t *testing.T) {
	g := NewWithT(t)
	m := memcached("cache", cachev1alpha1.MemcachedSpec{
		ContainerPort: ptr.To[int32](11311),
		Monitoring:    &cachev1alpha1.MonitoringSpec{Enabled: true},
	})
	pod := StatefulSet(m, testImages, SecretDigests{}).Spec.Template.Spec
	g.Expect(pod.Containers).To(HaveLen(2))
	e := pod.Containers[1]
	g.Expect(*e.Name).To(Equal(ExporterContainerName))
	g.Expect(*e.Image).To(Equal("exporter:1"))
	g.Expect(e.Args).To(ContainElement("--memcached.address=localhost:11311"))
	g.Expect(*e.Ports[0].Name).To(Equal(MetricsPortName))
	g.Expect(*e.Ports[0].ContainerPort).To(Equal(MetricsPort))
	g.Expect(*e.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(*e.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(e.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))

	ports := Service(m, false).Spec.Ports
	g.Expect(ports).To(HaveLen(2))
	g.Expect(*ports[1].Name).To(Equal(MetricsPortName))
	g.Expect(*ports[1].Port).To(Equal(MetricsPort))

	off := memcached("cache", cachev1alpha1.MemcachedSpec{Monitoring: &cachev1alpha1.MonitoringSpec{Enabled: false}})
	g.Expect(StatefulSet(off, testImages, SecretDigests{}).Spec.Template.Spec.Containers).To(HaveLen(1))
	g.Expect(Service(off, false).Spec.Ports).To(HaveLen(1))
}

func TestServiceMonitorScrapesOnlyItsMemcached(t *testing.T) {
	g := NewWithT(t)
	m := memcached("cache", cachev1alpha1.MemcachedSpec{Monitoring: &cachev1alpha1.MonitoringSpec{
		Enabled:              true,
		Interval:             "15s",
		ServiceMonitorLabels: map[string]cachev1alpha1.LabelValue{"release": "prometheus"},
	}})
	sm := ServiceMonitor(m)
	g.Expect(*sm.Name).To(Equal("cache"))
	g.Expect(*sm.Kind).To(Equal("ServiceMonitor"))
	g.Expect(sm.Labels).To(HaveKeyWithValue("release", "prometheus"))
	g.Expect(sm.Labels).To(HaveKeyWithValue(LabelManagedBy, ManagedBy))
	g.Expect(*sm.OwnerReferences[0].Controller).To(BeTrue())
	g.Expect(sm.Spec.Selector.MatchLabels).To(Equal(SelectorLabels(m)))
	g.Expect(sm.Spec.Endpoints).To(HaveLen(1))
	g.Expect(*sm.Spec.Endpoints[0].Port).To(Equal(MetricsPortName))
	g.Expect(string(*sm.Spec.Endpoints[0].Interval)).To(Equal("15s"))
}

// The warm runner takes every setting the operator writes, at each end of
// every field's bounds (package settings holds the runner to those).
func TestTheRunnerTakesEverySettingWritten(t *testing.T) {
	for _, spec := range []cachev1alpha1.MemcachedSpec{
		{MemoryLimitMiB: ptr.To[int32](8), MaxConnections: ptr.To[int32](16), Threads: ptr.To[int32](1), Verbosity: ptr.To[int32](1), MaxItemSize: "512Ki"},
		{MemoryLimitMiB: ptr.To[int32](65536), MaxConnections: ptr.To[int32](65536), Threads: ptr.To[int32](64), Verbosity: ptr.To[int32](2), MaxItemSize: "1Gi"},
	} {
		g := NewWithT(t)
		m := &cachev1alpha1.Memcached{Spec: spec}
		flags, err := settings.Parse(warmSettings(m))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(flags).To(Equal(ContainerSettings(m)))
	}
}
