package desired

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// The exporter runs with the resources spec.monitoring gives it, and
// with none when none are given.
func TestTheExporterTakesTheResourcesGiven(t *testing.T) {
	g := NewWithT(t)
	limits := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	given := memcached("cache", cachev1alpha1.MemcachedSpec{Monitoring: &cachev1alpha1.MonitoringSpec{
		Enabled: true, Resources: &corev1.ResourceRequirements{Limits: limits},
	}})
	c := exporter(given, Images{Exporter: "exporter"})
	g.Expect(c.Resources).NotTo(BeNil())
	g.Expect(c.Resources.Limits).To(HaveValue(Equal(limits)))
	none := memcached("cache", cachev1alpha1.MemcachedSpec{Monitoring: &cachev1alpha1.MonitoringSpec{Enabled: true}})
	g.Expect(exporter(none, Images{Exporter: "exporter"}).Resources).To(BeNil())
}

// The discovery container mounts the pod's served files (read as
// memcached reads them) when it speaks to memcached over TLS, or logs in
// to move keys; with neither, it mounts only the membership.
func TestTheDiscoveryContainerMountsTheServedFilesItReads(t *testing.T) {
	moves := &cachev1alpha1.KeyMovesSpec{}
	auth := &cachev1alpha1.AuthSpec{SecretName: "auth"}
	for _, tc := range []struct {
		name   string
		spec   cachev1alpha1.MemcachedSpec
		served bool
	}{
		{"neither", cachev1alpha1.MemcachedSpec{}, false},
		{"key moves in the clear without authentication", cachev1alpha1.MemcachedSpec{KeyMoves: moves}, false},
		{"authentication without key moves", cachev1alpha1.MemcachedSpec{Auth: auth}, false},
		{"key moves with authentication", cachev1alpha1.MemcachedSpec{KeyMoves: moves, Auth: auth}, true},
		{"TLS", cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "tls"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := discoveryContainer(memcached("cache", tc.spec), Images{Reloader: "reloader"})
			var mounts []string
			for _, v := range c.VolumeMounts {
				mounts = append(mounts, *v.Name)
			}
			if tc.served {
				g.Expect(mounts).To(ContainElement(servedVolume))
			} else {
				g.Expect(mounts).NotTo(ContainElement(servedVolume))
			}
		})
	}
}

// With spec.autoscaling the discovery container serves the signals, on a
// port of their own, logged in as the key moves are; without, it serves
// no signals.
func TestTheDiscoveryContainerServesTheSignalsOfAnAutoscaledMemcached(t *testing.T) {
	g := NewWithT(t)
	moves := &cachev1alpha1.KeyMovesSpec{Ring: "node"}
	auth := &cachev1alpha1.AuthSpec{SecretName: "auth"}
	scaled := memcached("cache", cachev1alpha1.MemcachedSpec{KeyMoves: moves, Auth: auth,
		Autoscaling: &cachev1alpha1.AutoscalingSpec{MinSize: 1, MaxSize: 3}})
	c := discoveryContainer(scaled, Images{Reloader: "reloader"})
	g.Expect(c.Args).To(ContainElements("--signals-listen=:11213", "--auth-file="+servedDir+"/"+authFile))
	var ports []string
	for _, p := range c.Ports {
		ports = append(ports, *p.Name)
	}
	g.Expect(ports).To(Equal([]string{DiscoveryPortName, "signals"}))
	plain := discoveryContainer(memcached("cache", cachev1alpha1.MemcachedSpec{KeyMoves: moves}), Images{Reloader: "reloader"})
	g.Expect(plain.Args).NotTo(ContainElement(HavePrefix("--signals-listen")))
	g.Expect(plain.Ports).To(HaveLen(1))
}
