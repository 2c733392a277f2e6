// Package golden holds the specs whose rendered objects are committed in
// pkg/desired/testdata/golden, and renders them: what an upgrade of the
// operator would change in each cache.
package golden

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/fuzzspec"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

// Specs are the Memcacheds whose rendered objects are kept in
// pkg/desired/testdata/golden: what users run, from the defaults to every field set.
// Each is as the apiserver admits it (the CRD's defaults filled in).
func Specs() map[string]cachev1alpha1.MemcachedSpec {
	admitted := func(s cachev1alpha1.MemcachedSpec) cachev1alpha1.MemcachedSpec {
		if s.Size == nil {
			s.Size = ptr.To[int32](1)
		}
		if s.ContainerPort == nil {
			s.ContainerPort = ptr.To[int32](11211)
		}
		return s
	}
	instance := &cachev1alpha1.LabelSelector{MatchLabels: map[string]cachev1alpha1.LabelValue{"app.kubernetes.io/instance": "cache"}}
	return map[string]cachev1alpha1.MemcachedSpec{
		"defaults": admitted(cachev1alpha1.MemcachedSpec{}),
		"size-3":   admitted(cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)}),
		"settings": admitted(cachev1alpha1.MemcachedSpec{
			Size: ptr.To[int32](2), ContainerPort: ptr.To[int32](11311), Image: "memcached:1.6.38",
			MemoryLimitMiB: ptr.To[int32](128), MaxConnections: ptr.To[int32](2048), Threads: ptr.To[int32](2),
			MaxItemSize: "2Mi", Verbosity: ptr.To[int32](1),
			ImagePullSecrets:  []cachev1alpha1.ImagePullSecret{{Name: "registry"}},
			PriorityClassName: "cache-critical",
			PodLabels:         map[string]cachev1alpha1.LabelValue{"team": "payments"},
			PodAnnotations:    map[string]cachev1alpha1.AnnotationValue{"example.com/owner": "payments"},
			Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("160Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("192Mi")},
			},
		}),
		"scheduling": admitted(cachev1alpha1.MemcachedSpec{
			Size:         ptr.To[int32](3),
			NodeSelector: map[string]cachev1alpha1.LabelValue{"kubernetes.io/os": "linux"},
			Tolerations:  []cachev1alpha1.Toleration{{Key: "dedicated", Operator: "Equal", Value: "cache", Effect: "NoSchedule"}},
			Affinity: &cachev1alpha1.Affinity{PodAntiAffinity: &cachev1alpha1.PodAffinity{Preferred: []cachev1alpha1.WeightedPodAffinityTerm{{
				Weight: 50, PodAffinityTerm: cachev1alpha1.PodAffinityTerm{LabelSelector: instance, TopologyKey: "kubernetes.io/hostname"},
			}}}},
			TopologySpreadConstraints: []cachev1alpha1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: "ScheduleAnyway", LabelSelector: instance,
			}},
		}),
		"monitoring": admitted(cachev1alpha1.MemcachedSpec{
			Size:       ptr.To[int32](2),
			Monitoring: &cachev1alpha1.MonitoringSpec{Enabled: true, Interval: "30s", ServiceMonitorLabels: map[string]cachev1alpha1.LabelValue{"release": "prometheus"}},
		}),
		"network-policy": admitted(cachev1alpha1.MemcachedSpec{
			Size:       ptr.To[int32](2),
			Monitoring: &cachev1alpha1.MonitoringSpec{Enabled: true},
			NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true, Clients: []cachev1alpha1.NetworkPolicyPeer{
				{PodSelector: &cachev1alpha1.LabelSelector{MatchLabels: map[string]cachev1alpha1.LabelValue{"app": "web"}}},
				{NamespaceSelector: &cachev1alpha1.LabelSelector{MatchExpressions: []cachev1alpha1.LabelSelectorRequirement{{Key: "team", Operator: "In", Values: []cachev1alpha1.LabelValue{"payments"}}}}},
			}},
		}),
		"tls-auth": admitted(cachev1alpha1.MemcachedSpec{
			Size: ptr.To[int32](2),
			TLS:  &cachev1alpha1.TLSSpec{SecretName: "cache-tls", ClientCertificates: cachev1alpha1.ClientCertificatesRequire},
			Auth: &cachev1alpha1.AuthSpec{SecretName: "cache-auth", Key: "authfile"},
		}),
	}
}

// Memcached is the Memcached of spec name, as the golden files render it.
func Memcached(name string) *cachev1alpha1.Memcached {
	return &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "team", UID: "6b3c0e62-4a8e-4f0e-9a52-0c1d2e3f4a5b"},
		Spec:       Specs()[name],
	}
}

// Render is the YAML of the objects the operator builds for m, in a fixed
// order: StatefulSet, Service, PodDisruptionBudget (when m has one),
// ServiceMonitor (when monitored), NetworkPolicy (when m asks for one).
func Render(m *cachev1alpha1.Memcached) ([]byte, error) {
	images := desired.Images{Memcached: desired.DefaultImage, Exporter: desired.DefaultExporterImage, Reloader: testenv.ReloaderImage}
	digests := desired.SecretDigests{TLS: "sha256:tls-content", Auth: "sha256:auth-content"}
	objs := fuzzspec.Objects(m, images, digests)
	var out bytes.Buffer
	for _, kind := range []owned.Kind{owned.KindStatefulSet, owned.KindService, owned.KindPodDisruptionBudget, owned.KindServiceMonitor, owned.KindNetworkPolicy} {
		obj, ok := objs[kind]
		if !ok || (kind == owned.KindPodDisruptionBudget && !desired.WantsPodDisruptionBudget(m)) {
			continue
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	return out.Bytes(), nil
}

// Path is the golden file of spec name, relative to the repository.
func Path(name string) string {
	return filepath.Join("pkg", "desired", "testdata", "golden", name+".yaml")
}

// ChangedSince tells whether the golden file of spec name differs between
// the commit ref and the working tree (a file missing at ref counts as
// changed).
func ChangedSince(ref, name string) (bool, error) {
	now, err := os.ReadFile(repo.Path(Path(name)))
	if err != nil {
		return false, err
	}
	cmd := exec.Command("git", "show", ref+":"+Path(name))
	cmd.Dir = repo.Root()
	then, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return true, nil
		}
		return false, fmt.Errorf("git show %s:%s: %w", ref, Path(name), err)
	}
	return !bytes.Equal(then, now), nil
}
