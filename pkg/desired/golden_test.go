package desired_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/fuzzspec"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestRenderedObjectsMatchTheGoldenFiles")

// goldenSpecs are the Memcacheds whose rendered objects are kept in
// testdata/golden: what users run, from the defaults to every field set.
// Each is as the apiserver admits it (the CRD's defaults filled in).
func goldenSpecs() map[string]cachev1alpha1.MemcachedSpec {
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
		"tls-auth": admitted(cachev1alpha1.MemcachedSpec{
			Size: ptr.To[int32](2),
			TLS:  &cachev1alpha1.TLSSpec{SecretName: "cache-tls", ClientCertificates: cachev1alpha1.ClientCertificatesRequire},
			Auth: &cachev1alpha1.AuthSpec{SecretName: "cache-auth", Key: "authfile"},
		}),
	}
}

// An upgrade of the operator rolls a cache's pods when what it renders for
// the same Memcached changes: the rendered Deployment, Service, budget and
// ServiceMonitor of each spec above are kept in testdata/golden, and this
// test fails when the builders render anything else. A change to the
// builders therefore lands with its golden files (go test ./pkg/desired
// -run TestRenderedObjectsMatchTheGoldenFiles -update), where a reviewer
// sees what it does to every cache, and docs/install.md's upgrade notes
// say which versions roll pods.
func TestRenderedObjectsMatchTheGoldenFiles(t *testing.T) {
	images := desired.Images{Memcached: desired.DefaultImage, Exporter: desired.DefaultExporterImage}
	digests := desired.SecretDigests{TLS: "sha256:tls-content", Auth: "sha256:auth-content"}
	for name, spec := range goldenSpecs() {
		t.Run(name, func(t *testing.T) {
			m := &cachev1alpha1.Memcached{
				ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "team", UID: "6b3c0e62-4a8e-4f0e-9a52-0c1d2e3f4a5b"},
				Spec:       spec,
			}
			objs := fuzzspec.Objects(m, images, digests)
			var got bytes.Buffer
			for _, kind := range []owned.Kind{owned.KindDeployment, owned.KindService, owned.KindPodDisruptionBudget, owned.KindServiceMonitor} {
				obj, ok := objs[kind]
				if !ok || (kind == owned.KindPodDisruptionBudget && !desired.WantsPodDisruptionBudget(m)) {
					continue
				}
				b, err := yaml.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				got.WriteString("---\n")
				got.Write(b)
			}
			path := filepath.Join("testdata", "golden", name+".yaml")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./pkg/desired -run TestRenderedObjectsMatchTheGoldenFiles -update writes it)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("the objects rendered for spec %q differ from %s: an upgrade to this build changes them (and rolls the pods when the Deployment's template changed). If that is meant, rewrite the golden files with -update in the same commit and say so in docs/install.md's upgrade notes.\n%s",
					name, path, cmp.Diff(string(want), got.String()))
			}
		})
	}
}
