//go:build integration

package desired_test

import (
	"context"
	"sync"
	"testing"

	monitoringclient "github.com/prometheus-operator/prometheus-operator/pkg/client/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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
// apiserver admits, the apiserver also accepts the Deployment, Service,
// PodDisruptionBudget and ServiceMonitor built from it (server-side dry
// run, as the operator's field manager). And each object the apiserver
// answers with, summarized as the operator's store summarizes it, compares
// as "applies nothing" with the same object built again, and as owning
// exactly its fields: the rule that makes a converged Memcached cost no
// request. Besides the operator's own settings, it generates the fields the
// operator passes through to the pods (a toleration, a spread constraint, a
// required node affinity term, pod labels, the Secrets of TLS and
// authentication): the CRD must refuse what the
// apiserver would refuse there. The seeds below and testdata/fuzz/ run with
// every integration `go test`; `make fuzz` explores further. Its workers
// share the kube-apiserver that the coordinating process started (see
// testenv.SharedKubeconfig), and it bounds minimization by executions:
// every execution is a round trip to the apiserver, so go test's default of
// 60 s per new input stalls the run.
func FuzzAdmittedSpecGivesAcceptedDeployment(f *testing.F) {
	for _, sd := range fuzzSeeds {
		in := sd.in
		f.Add(in.name, in.size, in.port, in.image, in.mem, in.conns, in.threads, in.cpu, in.memory,
			in.maxItemSize, in.verbosity, in.monitoring, in.podLabelKey, in.podLabelValue,
			in.tolKey, in.tolOp, in.tolValue, in.tolEffect, in.tolSeconds,
			in.spreadKey, in.spreadWhen, in.spreadSkew, in.nodeKey, in.nodeOp, in.nodeValue,
			in.tlsSecret, in.clientCerts, in.authKey)
	}
	f.Fuzz(func(t *testing.T, name string, size, port int32, image string, mem, conns, threads int32, cpu, memory string,
		maxItemSize string, verbosity int32, monitoring bool, podLabelKey, podLabelValue string,
		tolKey, tolOp, tolValue, tolEffect string, tolSeconds int64,
		spreadKey, spreadWhen string, spreadSkew int32, nodeKey, nodeOp, nodeValue string,
		tlsSecret, clientCerts, authKey string) {
		checkSpec(t, fuzzInput{name, size, port, image, mem, conns, threads, cpu, memory,
			maxItemSize, verbosity, monitoring, podLabelKey, podLabelValue,
			tolKey, tolOp, tolValue, tolEffect, tolSeconds,
			spreadKey, spreadWhen, spreadSkew, nodeKey, nodeOp, nodeValue,
			tlsSecret, clientCerts, authKey}.memcached())
	})
}

// fuzzInput is one input of the fuzz target.
type fuzzInput struct {
	name                       string
	size, port                 int32
	image                      string
	mem, conns, threads        int32
	cpu, memory                string
	maxItemSize                string
	verbosity                  int32
	monitoring                 bool
	podLabelKey, podLabelValue string
	tolKey, tolOp, tolValue    string
	tolEffect                  string
	tolSeconds                 int64
	spreadKey, spreadWhen      string
	spreadSkew                 int32
	nodeKey, nodeOp, nodeValue string
	// tlsSecret names spec.tls's Secret, with clientCerts; authKey is
	// spec.auth's key (of a Secret named "users").
	tlsSecret, clientCerts string
	authKey                string
}

// fuzzDigests are the digests the builders get: any value of a digest.
var fuzzDigests = desired.SecretDigests{
	TLS:  "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	Auth: "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210",
}

// fuzzSeed is one seed input, and whether the apiserver admits it: a seed
// meant to reach the builders must be admitted, or the target checks
// nothing with it.
type fuzzSeed struct {
	in       fuzzInput
	admitted bool
}

var fuzzSeeds = []fuzzSeed{
	{fuzzInput{name: "cache", size: 1, port: 11211}, true},
	{fuzzInput{name: "a", port: 1, image: "memcached", mem: 8, conns: 16, threads: 1, cpu: "1m", memory: "1Mi"}, true},
	{fuzzInput{name: "cache.with.dots", size: 100, port: 65535, image: "localhost:5000/memcached:1.6", mem: 65536, conns: 65536, threads: 64, cpu: "64", memory: "64Gi"}, false}, // a dot cannot name a Service
	{fuzzInput{name: "cache-0123456789-0123456789-0123456789-0123456789-0123456789-ab", size: 3, port: 80, image: "registry.example.com/a/b/c@sha256:0123456789012345678901234567890123456789012345678901234567890123", mem: 100, conns: 1024, threads: 4, cpu: "0.5", memory: "300M"}, true},
	{fuzzInput{name: "cache-big", size: 100, port: 65535, image: "localhost:5000/memcached:1.6", mem: 65536, conns: 65536, threads: 64, cpu: "64", memory: "64Gi"}, true},
	{fuzzInput{name: "settings", size: 2, port: 11211, mem: 64, maxItemSize: "32Mi", verbosity: 2, monitoring: true, podLabelKey: "example.com/team", podLabelValue: "payments"}, true},
	{fuzzInput{name: "item-too-big", size: 1, port: 11211, mem: 64, maxItemSize: "33Mi"}, false}, // above half the memory: memcached refuses
	{fuzzInput{name: "scheduling", size: 3, port: 11211,
		tolKey: "node.kubernetes.io/unreachable", tolOp: "Exists", tolEffect: "NoExecute", tolSeconds: 30,
		spreadKey: "topology.kubernetes.io/zone", spreadWhen: "DoNotSchedule", spreadSkew: 2,
		nodeKey: "example.com/pool", nodeOp: "In", nodeValue: "cache"}, true},
	{fuzzInput{name: "tolerate-everything", size: 1, port: 11211, tolOp: "Exists"}, true},
	{fuzzInput{name: "sometimes", size: 1, port: 11211, tolKey: "dedicated", tolOp: "Sometimes"}, false},             // the apiserver refuses it in a pod
	{fuzzInput{name: "exists-with-value", size: 1, port: 11211, tolKey: "a", tolOp: "Exists", tolValue: "b"}, false}, // the apiserver refuses it in a pod
	{fuzzInput{name: "gt-two-values", size: 1, port: 11211, nodeKey: "cpus", nodeOp: "Gt", nodeValue: ""}, false},    // Gt needs one value: "" gives none
	{fuzzInput{name: "selector-label", size: 1, port: 11211, podLabelKey: "app.kubernetes.io/instance", podLabelValue: "other"}, false},
	{fuzzInput{name: "secure", size: 2, port: 11211, tlsSecret: "secure-tls", clientCerts: "Require", authKey: "memcached.users"}, true},
	{fuzzInput{name: "tls-monitored", size: 1, port: 11211, monitoring: true, tlsSecret: "tls", clientCerts: "Request"}, true},
	{fuzzInput{name: "auth-dot-dot", size: 1, port: 11211, authKey: ".."}, false}, // no Secret can hold that key
}

// memcached is the Memcached of one fuzz input.
func (in fuzzInput) memcached() *cachev1alpha1.Memcached {
	m := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: fuzzNamespace(), Name: in.name},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To(in.size), ContainerPort: ptr.To(in.port), Image: in.image, MaxItemSize: in.maxItemSize},
	}
	if in.mem != 0 {
		m.Spec.MemoryLimitMiB = ptr.To(in.mem)
	}
	if in.conns != 0 {
		m.Spec.MaxConnections = ptr.To(in.conns)
	}
	if in.threads != 0 {
		m.Spec.Threads = ptr.To(in.threads)
	}
	if in.verbosity != 0 {
		m.Spec.Verbosity = ptr.To(in.verbosity)
	}
	limits := corev1.ResourceList{}
	if q, err := resource.ParseQuantity(in.cpu); err == nil {
		limits[corev1.ResourceCPU] = q
	}
	if q, err := resource.ParseQuantity(in.memory); err == nil {
		limits[corev1.ResourceMemory] = q
	}
	if len(limits) > 0 {
		m.Spec.Resources = &corev1.ResourceRequirements{Limits: limits, Requests: limits}
	}
	if in.monitoring {
		m.Spec.Monitoring = &cachev1alpha1.MonitoringSpec{Enabled: true}
	}
	if in.podLabelKey != "" {
		m.Spec.PodLabels = map[string]cachev1alpha1.LabelValue{in.podLabelKey: cachev1alpha1.LabelValue(in.podLabelValue)}
	}
	if in.tolKey != "" || in.tolOp != "" || in.tolValue != "" || in.tolEffect != "" || in.tolSeconds != 0 {
		tol := cachev1alpha1.Toleration{Key: in.tolKey, Operator: in.tolOp, Value: cachev1alpha1.LabelValue(in.tolValue), Effect: in.tolEffect}
		if in.tolSeconds != 0 {
			tol.TolerationSeconds = ptr.To(in.tolSeconds)
		}
		m.Spec.Tolerations = []cachev1alpha1.Toleration{tol}
	}
	if in.spreadKey != "" || in.spreadWhen != "" || in.spreadSkew != 0 {
		m.Spec.TopologySpreadConstraints = []cachev1alpha1.TopologySpreadConstraint{{
			MaxSkew: in.spreadSkew, TopologyKey: cachev1alpha1.LabelKey(in.spreadKey), WhenUnsatisfiable: in.spreadWhen,
			LabelSelector: &cachev1alpha1.LabelSelector{MatchLabels: map[string]cachev1alpha1.LabelValue{desired.LabelInstance: cachev1alpha1.LabelValue(in.podLabelValue)}},
		}}
	}
	if in.tlsSecret != "" || in.clientCerts != "" {
		m.Spec.TLS = &cachev1alpha1.TLSSpec{SecretName: in.tlsSecret, ClientCertificates: cachev1alpha1.ClientCertificates(in.clientCerts)}
	}
	if in.authKey != "" {
		m.Spec.Auth = &cachev1alpha1.AuthSpec{SecretName: "users", Key: in.authKey}
	}
	if in.nodeKey != "" || in.nodeOp != "" {
		req := cachev1alpha1.NodeSelectorRequirement{Key: cachev1alpha1.LabelKey(in.nodeKey), Operator: in.nodeOp}
		if in.nodeValue != "" {
			req.Values = []string{in.nodeValue}
		}
		m.Spec.Affinity = &cachev1alpha1.Affinity{NodeAffinity: &cachev1alpha1.NodeAffinity{
			Required: &cachev1alpha1.NodeSelector{NodeSelectorTerms: []cachev1alpha1.NodeSelectorTerm{{
				MatchExpressions: []cachev1alpha1.NodeSelectorRequirement{req},
			}}},
		}}
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
	desired.Deployment(m, images, fuzzDigests)
	desired.Service(m)
	desired.PodDisruptionBudget(m)
	if desired.Monitored(m) {
		desired.ServiceMonitor(m)
	}

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
			return clientset().AppsV1().Deployments(m.Namespace).Apply(ctx, desired.Deployment(m, images, fuzzDigests), dryRun)
		},
		owned.KindService: func() (client.Object, error) {
			return clientset().CoreV1().Services(m.Namespace).Apply(ctx, desired.Service(m), dryRun)
		},
		owned.KindPodDisruptionBudget: func() (client.Object, error) {
			return clientset().PolicyV1().PodDisruptionBudgets(m.Namespace).Apply(ctx, desired.PodDisruptionBudget(m), dryRun)
		},
	}
	again := map[owned.Kind]func() any{
		owned.KindDeployment:          func() any { return desired.Deployment(m, images, fuzzDigests) },
		owned.KindService:             func() any { return desired.Service(m) },
		owned.KindPodDisruptionBudget: func() any { return desired.PodDisruptionBudget(m) },
	}
	if desired.Monitored(m) {
		if !serviceMonitors() {
			t.Fatal("the test apiserver serves no ServiceMonitors")
		}
		build[owned.KindServiceMonitor] = func() (client.Object, error) {
			return monitoringClientset().MonitoringV1().ServiceMonitors(m.Namespace).Apply(ctx, desired.ServiceMonitor(m), dryRun)
		}
		again[owned.KindServiceMonitor] = func() any { return desired.ServiceMonitor(m) }
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

var monitoringClientset = sync.OnceValue(func() monitoringclient.Interface { return monitoringclient.NewForConfigOrDie(env.Config) })

// serviceMonitors reads the ServiceMonitor schema from the apiserver, as
// the operator does when it starts, and tells whether it serves them.
var serviceMonitors = sync.OnceValue(func() bool {
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		return false
	}
	served, err := owned.LearnServiceMonitors(context.Background(), env.Config, hc)
	return err == nil && served
})

// images are the images of the operators tests start.
var images = desired.Images{Memcached: desired.DefaultImage, Exporter: desired.DefaultExporterImage}
