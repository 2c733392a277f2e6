// Package fuzzspec is the input of the fuzz targets that feed Memcacheds
// of every shape to the desired-state builders (pkg/desired) and to the
// rule that tells whether an apply is needed (pkg/owned): one Input type,
// the seeds both start from, the Memcached an Input makes, and the dry-run
// applies of the objects built from it.
package fuzzspec

import (
	"context"
	"fmt"
	"testing"

	monitoringv1ac "github.com/prometheus-operator/prometheus-operator/pkg/client/applyconfiguration/monitoring/v1"
	monitoringclient "github.com/prometheus-operator/prometheus-operator/pkg/client/versioned"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

// Input is one input of the fuzz targets: the operator's own settings,
// and the fields it passes through to the pods (a toleration, a spread
// constraint, a required node affinity term, pod labels, the Secrets of TLS
// and authentication), where the CRD must refuse what the apiserver would
// refuse in a pod.
type Input struct {
	Name                       string
	Size, Port                 int32
	Image                      string
	Mem, Conns, Threads        int32
	CPU, Memory                string
	MaxItemSize                string
	Verbosity                  int32
	Monitoring                 bool
	PodLabelKey, PodLabelValue string
	TolKey, TolOp, TolValue    string
	TolEffect                  string
	TolSeconds                 int64
	SpreadKey, SpreadWhen      string
	SpreadSkew                 int32
	NodeKey, NodeOp, NodeValue string
	// TLSSecret names spec.tls's Secret, with ClientCerts; AuthKey is
	// spec.auth's key (of a Secret named "users").
	TLSSecret, ClientCerts string
	AuthKey                string
	// NetworkPolicy turns spec.networkPolicy on; with ClientKey, its one
	// client is the pods labelled ClientKey: ClientValue in the namespaces
	// labelled the same.
	NetworkPolicy          bool
	ClientKey, ClientValue string
}

// Digests are the digests the builders get: any value of a digest.
var Digests = desired.SecretDigests{
	TLS:  "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	Auth: "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210",
}

// Seed is one seed input, and whether the apiserver admits it: a seed
// meant to reach the builders must be admitted, or the targets check
// nothing with it.
type Seed struct {
	In       Input
	Admitted bool
}

// Seeds are the inputs every fuzz target starts from, and runs with every
// integration go test.
var Seeds = []Seed{
	{In: Input{Name: "cache", Size: 1, Port: 11211}, Admitted: true},
	{In: Input{Name: "a", Port: 1, Image: "memcached", Mem: 8, Conns: 16, Threads: 1, CPU: "1m", Memory: "1Mi"}, Admitted: true},
	{In: Input{Name: "cache.with.dots", Size: 100, Port: 65535, Image: "localhost:5000/memcached:1.6", Mem: 65536, Conns: 65536, Threads: 64, CPU: "64", Memory: "64Gi"}, Admitted: false}, // a dot cannot name a Service
	{In: Input{Name: "cache-0123456789-0123456789-0123456789-0123456789-0123456789-ab", Size: 3, Port: 80, Image: "registry.example.com/a/b/c@sha256:0123456789012345678901234567890123456789012345678901234567890123", Mem: 100, Conns: 1024, Threads: 4, CPU: "0.5", Memory: "300M"}, Admitted: true},
	{In: Input{Name: "cache-big", Size: 100, Port: 65535, Image: "localhost:5000/memcached:1.6", Mem: 65536, Conns: 65536, Threads: 64, CPU: "64", Memory: "64Gi"}, Admitted: true},
	{In: Input{Name: "settings", Size: 2, Port: 11211, Mem: 64, MaxItemSize: "32Mi", Verbosity: 2, Monitoring: true, PodLabelKey: "example.com/team", PodLabelValue: "payments"}, Admitted: true},
	{In: Input{Name: "item-too-big", Size: 1, Port: 11211, Mem: 64, MaxItemSize: "33Mi"}, Admitted: false}, // above half the memory: memcached refuses
	{In: Input{Name: "scheduling", Size: 3, Port: 11211,
		TolKey: "node.kubernetes.io/unreachable", TolOp: "Exists", TolEffect: "NoExecute", TolSeconds: 30,
		SpreadKey: "topology.kubernetes.io/zone", SpreadWhen: "DoNotSchedule", SpreadSkew: 2,
		NodeKey: "example.com/pool", NodeOp: "In", NodeValue: "cache"}, Admitted: true},
	{In: Input{Name: "tolerate-everything", Size: 1, Port: 11211, TolOp: "Exists"}, Admitted: true},
	{In: Input{Name: "sometimes", Size: 1, Port: 11211, TolKey: "dedicated", TolOp: "Sometimes"}, Admitted: false},             // the apiserver refuses it in a pod
	{In: Input{Name: "exists-with-value", Size: 1, Port: 11211, TolKey: "a", TolOp: "Exists", TolValue: "b"}, Admitted: false}, // the apiserver refuses it in a pod
	{In: Input{Name: "gt-two-values", Size: 1, Port: 11211, NodeKey: "cpus", NodeOp: "Gt", NodeValue: ""}, Admitted: false},    // Gt needs one value: "" gives none
	{In: Input{Name: "selector-label", Size: 1, Port: 11211, PodLabelKey: "app.kubernetes.io/instance", PodLabelValue: "other"}, Admitted: false},
	{In: Input{Name: "secure", Size: 2, Port: 11211, TLSSecret: "secure-tls", ClientCerts: "Require", AuthKey: "memcached.users"}, Admitted: true},
	{In: Input{Name: "tls-monitored", Size: 1, Port: 11211, Monitoring: true, TLSSecret: "tls", ClientCerts: "Request"}, Admitted: true},
	{In: Input{Name: "auth-dot-dot", Size: 1, Port: 11211, AuthKey: ".."}, Admitted: false}, // no Secret can hold that key
	{In: Input{Name: "fenced", Size: 2, Port: 11211, Monitoring: true, NetworkPolicy: true}, Admitted: true},
	{In: Input{Name: "fenced-clients", Size: 1, Port: 11311, NetworkPolicy: true, ClientKey: "example.com/role", ClientValue: "web"}, Admitted: true},
	{In: Input{Name: "fenced-bad-key", Size: 1, Port: 11211, NetworkPolicy: true, ClientKey: "-role", ClientValue: "web"}, Admitted: false}, // not a label key
}

// Fuzz adds the seeds to f and fuzzes check with inputs of every shape.
func Fuzz(f *testing.F, check func(t *testing.T, in Input)) {
	for _, sd := range Seeds {
		in := sd.In
		f.Add(in.Name, in.Size, in.Port, in.Image, in.Mem, in.Conns, in.Threads, in.CPU, in.Memory,
			in.MaxItemSize, in.Verbosity, in.Monitoring, in.PodLabelKey, in.PodLabelValue,
			in.TolKey, in.TolOp, in.TolValue, in.TolEffect, in.TolSeconds,
			in.SpreadKey, in.SpreadWhen, in.SpreadSkew, in.NodeKey, in.NodeOp, in.NodeValue,
			in.TLSSecret, in.ClientCerts, in.AuthKey,
			in.NetworkPolicy, in.ClientKey, in.ClientValue)
	}
	f.Fuzz(func(t *testing.T, name string, size, port int32, image string, mem, conns, threads int32, cpu, memory string,
		maxItemSize string, verbosity int32, monitoring bool, podLabelKey, podLabelValue string,
		tolKey, tolOp, tolValue, tolEffect string, tolSeconds int64,
		spreadKey, spreadWhen string, spreadSkew int32, nodeKey, nodeOp, nodeValue string,
		tlsSecret, clientCerts, authKey string,
		networkPolicy bool, clientKey, clientValue string) {
		check(t, Input{name, size, port, image, mem, conns, threads, cpu, memory,
			maxItemSize, verbosity, monitoring, podLabelKey, podLabelValue,
			tolKey, tolOp, tolValue, tolEffect, tolSeconds,
			spreadKey, spreadWhen, spreadSkew, nodeKey, nodeOp, nodeValue,
			tlsSecret, clientCerts, authKey,
			networkPolicy, clientKey, clientValue})
	})
}

// Memcached is the Memcached of in, in namespace.
func (in Input) Memcached(namespace string) *cachev1alpha1.Memcached {
	m := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: in.Name},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To(in.Size), ContainerPort: ptr.To(in.Port), Image: in.Image, MaxItemSize: in.MaxItemSize},
	}
	if in.Mem != 0 {
		m.Spec.MemoryLimitMiB = ptr.To(in.Mem)
	}
	if in.Conns != 0 {
		m.Spec.MaxConnections = ptr.To(in.Conns)
	}
	if in.Threads != 0 {
		m.Spec.Threads = ptr.To(in.Threads)
	}
	if in.Verbosity != 0 {
		m.Spec.Verbosity = ptr.To(in.Verbosity)
	}
	limits := corev1.ResourceList{}
	if q, err := resource.ParseQuantity(in.CPU); err == nil {
		limits[corev1.ResourceCPU] = q
	}
	if q, err := resource.ParseQuantity(in.Memory); err == nil {
		limits[corev1.ResourceMemory] = q
	}
	if len(limits) > 0 {
		m.Spec.Resources = &corev1.ResourceRequirements{Limits: limits, Requests: limits}
	}
	if in.Monitoring {
		m.Spec.Monitoring = &cachev1alpha1.MonitoringSpec{Enabled: true}
	}
	if in.PodLabelKey != "" {
		m.Spec.PodLabels = map[string]cachev1alpha1.LabelValue{in.PodLabelKey: cachev1alpha1.LabelValue(in.PodLabelValue)}
	}
	if in.TolKey != "" || in.TolOp != "" || in.TolValue != "" || in.TolEffect != "" || in.TolSeconds != 0 {
		tol := cachev1alpha1.Toleration{Key: in.TolKey, Operator: in.TolOp, Value: cachev1alpha1.LabelValue(in.TolValue), Effect: in.TolEffect}
		if in.TolSeconds != 0 {
			tol.TolerationSeconds = ptr.To(in.TolSeconds)
		}
		m.Spec.Tolerations = []cachev1alpha1.Toleration{tol}
	}
	if in.SpreadKey != "" || in.SpreadWhen != "" || in.SpreadSkew != 0 {
		m.Spec.TopologySpreadConstraints = []cachev1alpha1.TopologySpreadConstraint{{
			MaxSkew: in.SpreadSkew, TopologyKey: cachev1alpha1.LabelKey(in.SpreadKey), WhenUnsatisfiable: in.SpreadWhen,
			LabelSelector: &cachev1alpha1.LabelSelector{MatchLabels: map[string]cachev1alpha1.LabelValue{desired.LabelInstance: cachev1alpha1.LabelValue(in.PodLabelValue)}},
		}}
	}
	if in.TLSSecret != "" || in.ClientCerts != "" {
		m.Spec.TLS = &cachev1alpha1.TLSSpec{SecretName: in.TLSSecret, ClientCertificates: cachev1alpha1.ClientCertificates(in.ClientCerts)}
	}
	if in.AuthKey != "" {
		m.Spec.Auth = &cachev1alpha1.AuthSpec{SecretName: "users", Key: in.AuthKey}
	}
	if in.NetworkPolicy {
		m.Spec.NetworkPolicy = &cachev1alpha1.NetworkPolicySpec{Enabled: true}
		if in.ClientKey != "" {
			sel := &cachev1alpha1.LabelSelector{MatchLabels: map[string]cachev1alpha1.LabelValue{in.ClientKey: cachev1alpha1.LabelValue(in.ClientValue)}}
			m.Spec.NetworkPolicy.Clients = []cachev1alpha1.NetworkPolicyPeer{{PodSelector: sel, NamespaceSelector: sel}}
		}
	}
	if in.NodeKey != "" || in.NodeOp != "" {
		req := cachev1alpha1.NodeSelectorRequirement{Key: cachev1alpha1.LabelKey(in.NodeKey), Operator: in.NodeOp}
		if in.NodeValue != "" {
			req.Values = []string{in.NodeValue}
		}
		m.Spec.Affinity = &cachev1alpha1.Affinity{NodeAffinity: &cachev1alpha1.NodeAffinity{
			Required: &cachev1alpha1.NodeSelector{NodeSelectorTerms: []cachev1alpha1.NodeSelectorTerm{{
				MatchExpressions: []cachev1alpha1.NodeSelectorRequirement{req},
			}}},
		}}
	}
	return m
}

// Objects are the apply configurations the operator builds for m, by
// kind: the StatefulSet, Service and PodDisruptionBudget, the
// ServiceMonitor when m asks for monitoring and the NetworkPolicy when m
// asks for one.
func Objects(m *cachev1alpha1.Memcached, images desired.Images, digests desired.SecretDigests) map[owned.Kind]runtime.ApplyConfiguration {
	objs := map[owned.Kind]runtime.ApplyConfiguration{
		owned.KindStatefulSet:         desired.StatefulSet(m, images, digests),
		owned.KindService:             desired.Service(m, false),
		owned.KindPodDisruptionBudget: desired.PodDisruptionBudget(m),
	}
	if desired.RunsExporter(m) {
		objs[owned.KindServiceMonitor] = desired.ServiceMonitor(m)
	}
	if desired.WantsNetworkPolicy(m) {
		objs[owned.KindNetworkPolicy] = desired.NetworkPolicy(m, false)
	}
	return objs
}

// Clients send the dry-run applies of the objects the operator builds.
type Clients struct {
	kube       kubernetes.Interface
	monitoring monitoringclient.Interface
}

// NewClients returns the Clients of the apiserver of cfg.
func NewClients(cfg *rest.Config) (*Clients, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	monitoring, err := monitoringclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Clients{kube: kube, monitoring: monitoring}, nil
}

// DryRun applies as the operator's field manager, persisting nothing.
var DryRun = metav1.ApplyOptions{FieldManager: owned.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}}

// Applied is the apiserver's answer to the dry-run apply of one object:
// the object it would hold, or its refusal.
type Applied struct {
	Object client.Object
	Err    error
}

// DryRunApply applies each of the Objects of m with DryRun, and returns
// the apiserver's answers by kind.
func (c *Clients) DryRunApply(ctx context.Context, m *cachev1alpha1.Memcached, images desired.Images, digests desired.SecretDigests) map[owned.Kind]Applied {
	out := map[owned.Kind]Applied{}
	for kind, ac := range Objects(m, images, digests) {
		var a Applied
		switch ac := ac.(type) {
		case *appsv1ac.StatefulSetApplyConfiguration:
			a.Object, a.Err = c.kube.AppsV1().StatefulSets(m.Namespace).Apply(ctx, ac, DryRun)
		case *corev1ac.ServiceApplyConfiguration:
			a.Object, a.Err = c.kube.CoreV1().Services(m.Namespace).Apply(ctx, ac, DryRun)
		case *policyv1ac.PodDisruptionBudgetApplyConfiguration:
			a.Object, a.Err = c.kube.PolicyV1().PodDisruptionBudgets(m.Namespace).Apply(ctx, ac, DryRun)
		case *networkingv1ac.NetworkPolicyApplyConfiguration:
			a.Object, a.Err = c.kube.NetworkingV1().NetworkPolicies(m.Namespace).Apply(ctx, ac, DryRun)
		case *monitoringv1ac.ServiceMonitorApplyConfiguration:
			a.Object, a.Err = c.monitoring.MonitoringV1().ServiceMonitors(m.Namespace).Apply(ctx, ac, DryRun)
		default:
			a.Err = fmt.Errorf("no dry-run apply for %T", ac)
		}
		out[kind] = a
	}
	return out
}
