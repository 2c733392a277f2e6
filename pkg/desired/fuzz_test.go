//go:build integration

package desired_test

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testenv"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Run(m, &env) }

var fuzzNamespace = sync.OnceValue(func() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fuzz-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		panic(err)
	}
	return ns.Name
})

// FuzzAdmittedSpecGivesAcceptedDeployment feeds the desired-state builders
// Memcacheds of every shape: they never panic, and for every Memcached the
// apiserver admits, the apiserver also accepts the Deployment, Service and
// PodDisruptionBudget built from it (server-side dry run, as the operator's
// field manager). And each object the apiserver answers with, summarized as
// the operator's store summarizes it, compares as "applies nothing" with
// the same object built again, and as owning exactly its fields: the rule
// that makes a converged Memcached cost no request. The seeds below and
// testdata/fuzz/ run with every integration `go test`; `make fuzz` explores
// further. Its workers share the kube-apiserver that the coordinating
// process started (see testenv.SharedKubeconfig), and it bounds
// minimization by executions: every execution is a round trip to the
// apiserver, so go test's default of 60 s per new input stalls the run.
func FuzzAdmittedSpecGivesAcceptedDeployment(f *testing.F) {
	for _, sd := range fuzzSeeds {
		f.Add(sd.name, sd.size, sd.port, sd.image, sd.mem, sd.conns, sd.threads, sd.cpu, sd.memory)
	}
	f.Fuzz(func(t *testing.T, name string, size, port int32, image string, mem, conns, threads int32, cpu, memory string) {
		checkSpec(t, fuzzMemcached(name, size, port, image, mem, conns, threads, cpu, memory))
	})
}

// fuzzSeed is one seed input, and whether the apiserver admits it: a seed
// meant to reach the builders must be admitted, or the target checks
// nothing with it.
type fuzzSeed struct {
	name                string
	size, port          int32
	image               string
	mem, conns, threads int32
	cpu, memory         string
	admitted            bool
}

var fuzzSeeds = []fuzzSeed{
	{"cache", 1, 11211, "", 0, 0, 0, "", "", true},
	{"a", 0, 1, "memcached", 8, 16, 1, "1m", "1Mi", true},
	{"cache.with.dots", 100, 65535, "localhost:5000/memcached:1.6", 65536, 65536, 64, "64", "64Gi", false}, // a dot cannot name a Service
	{"cache-0123456789-0123456789-0123456789-0123456789-0123456789-ab", 3, 80, "registry.example.com/a/b/c@sha256:0123456789012345678901234567890123456789012345678901234567890123", 100, 1024, 4, "0.5", "300M", true},
	{"cache-big", 100, 65535, "localhost:5000/memcached:1.6", 65536, 65536, 64, "64", "64Gi", true},
}

// The seeds do what they are meant to: those meant to be admitted are,
// and reach the apiserver's acceptance of the built objects.
func TestFuzzSeedsAreAdmittedAsMeant(t *testing.T) {
	for _, sd := range fuzzSeeds {
		t.Run(sd.name, func(t *testing.T) {
			m := fuzzMemcached(sd.name, sd.size, sd.port, sd.image, sd.mem, sd.conns, sd.threads, sd.cpu, sd.memory)
			if got := checkSpec(t, m); got != sd.admitted {
				t.Fatalf("admitted: %v, meant %v", got, sd.admitted)
			}
		})
	}
}

// fuzzMemcached is the Memcached of one fuzz input.
func fuzzMemcached(name string, size, port int32, image string, mem, conns, threads int32, cpu, memory string) *cachev1alpha1.Memcached {
	m := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: fuzzNamespace(), Name: name},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To(size), ContainerPort: ptr.To(port), Image: image},
	}
	if mem != 0 {
		m.Spec.MemoryLimitMiB = ptr.To(mem)
	}
	if conns != 0 {
		m.Spec.MaxConnections = ptr.To(conns)
	}
	if threads != 0 {
		m.Spec.Threads = ptr.To(threads)
	}
	limits := corev1.ResourceList{}
	if q, err := resource.ParseQuantity(cpu); err == nil {
		limits[corev1.ResourceCPU] = q
	}
	if q, err := resource.ParseQuantity(memory); err == nil {
		limits[corev1.ResourceMemory] = q
	}
	if len(limits) > 0 {
		m.Spec.Resources = &corev1.ResourceRequirements{Limits: limits, Requests: limits}
	}

	return m
}

// checkSpec checks one Memcached: the builders never panic; when the
// apiserver admits it, each object built from it is accepted, and
// compares as applying nothing once recorded. It returns whether the
// Memcached was admitted; any answer to its creation but admission or a
// validation refusal fails the test, so that no input passes unchecked.
func checkSpec(t *testing.T, m *cachev1alpha1.Memcached) bool {
	t.Helper()
	name := m.Name
	// Never panics, admitted or not.
	desired.Deployment(m, desired.Images{Memcached: desired.DefaultImage})
	desired.Service(m)
	desired.PodDisruptionBudget(m)

	ctx := context.Background()
	if err := env.Client.Create(ctx, m.DeepCopy(), client.DryRunAll); err != nil {
		if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
			t.Fatalf("creating Memcached %q: %v", name, err)
		}
		return false // not admitted: the builder is never asked about it
	}
	m.UID = "00000000-0000-0000-0000-000000000001"
	build := map[owned.Kind]func() (client.Object, error){
		owned.KindDeployment: func() (client.Object, error) {
			return clientset().AppsV1().Deployments(m.Namespace).Apply(ctx, desired.Deployment(m, desired.Images{Memcached: desired.DefaultImage}), dryRun)
		},
		owned.KindService: func() (client.Object, error) {
			return clientset().CoreV1().Services(m.Namespace).Apply(ctx, desired.Service(m), dryRun)
		},
		owned.KindPodDisruptionBudget: func() (client.Object, error) {
			return clientset().PolicyV1().PodDisruptionBudgets(m.Namespace).Apply(ctx, desired.PodDisruptionBudget(m), dryRun)
		},
	}
	again := map[owned.Kind]func() any{
		owned.KindDeployment:          func() any { return desired.Deployment(m, desired.Images{Memcached: desired.DefaultImage}) },
		owned.KindService:             func() any { return desired.Service(m) },
		owned.KindPodDisruptionBudget: func() any { return desired.PodDisruptionBudget(m) },
	}
	for kind, apply := range build {
		obj, err := apply()
		if err != nil {
			t.Fatalf("admitted Memcached %q %+v gives a %s the apiserver refuses: %v", name, m.Spec, kind, err)
		}
		s, err := owned.Summarize(obj)
		if err != nil {
			t.Fatalf("summarizing %s: %v", kind, err)
		}
		if nothing, err := s.AppliesNothing(again[kind]()); err != nil || !nothing {
			t.Fatalf("admitted Memcached %q %+v: the %s the apiserver recorded does not compare as applying nothing (err %v): a converged Memcached would be applied on every reconcile", name, m.Spec, kind, err)
		}
		if exactly, err := s.OwnsExactly(again[kind]()); err != nil || !exactly {
			t.Fatalf("admitted Memcached %q %+v: the operator does not own exactly the fields of its %s (err %v): every reconcile would read it to name a drift", name, m.Spec, kind, err)
		}
	}
	return true
}

// dryRun applies as the operator's field manager, persisting nothing.
var dryRun = metav1.ApplyOptions{FieldManager: owned.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}}

var clientset = sync.OnceValue(func() kubernetes.Interface { return kubernetes.NewForConfigOrDie(env.Config) })
