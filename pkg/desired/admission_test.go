//go:build integration

package desired_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/jsonconv"
)

// Who would refuse a spec if the CRD admitted it.
const (
	// byAPIServer: the apiserver refuses an object built from it.
	byAPIServer = iota
	// byMemcached: memcached refuses its command line and never starts
	// (shown on the real node by the e2e suite).
	byMemcached
	// byOperator: the operator's own rule: nothing else would refuse it,
	// and it would not do what it says.
	byOperator
)

type (
	tol  = cachev1alpha1.Toleration
	tsc  = cachev1alpha1.TopologySpreadConstraint
	nsr  = cachev1alpha1.NodeSelectorRequirement
	lsr  = cachev1alpha1.LabelSelectorRequirement
	lv   = cachev1alpha1.LabelValue
	term = cachev1alpha1.PodAffinityTerm
)

func requiredNode(reqs ...nsr) *cachev1alpha1.Affinity {
	return &cachev1alpha1.Affinity{NodeAffinity: &cachev1alpha1.NodeAffinity{Required: &cachev1alpha1.NodeSelector{
		NodeSelectorTerms: []cachev1alpha1.NodeSelectorTerm{{MatchExpressions: reqs}},
	}}}
}

func podAffinity(t term) *cachev1alpha1.Affinity {
	return &cachev1alpha1.Affinity{PodAntiAffinity: &cachev1alpha1.PodAffinity{Required: []term{t}}}
}

var selector = &cachev1alpha1.LabelSelector{MatchLabels: map[string]lv{"app": "cache"}}

// clients is a NetworkPolicy admitting peers to memcached's port.
func clients(peers ...cachev1alpha1.NetworkPolicyPeer) *cachev1alpha1.NetworkPolicySpec {
	return &cachev1alpha1.NetworkPolicySpec{Enabled: true, Clients: peers}
}

// Every spec below is refused when the Memcached is applied, with a
// message naming the field; and for those marked byAPIServer, the test
// also builds the objects from the spec as if it had been admitted and
// shows that the apiserver refuses one of them: the CRD refuses no more
// than what would fail anyway. The fuzz target checks the converse: what
// the CRD admits, the apiserver accepts.
func TestSpecsThatCannotRunAreRefusedAtAdmission(t *testing.T) {
	tests := []struct {
		name    string
		spec    cachev1alpha1.MemcachedSpec
		message string
		by      int
	}{
		{"toleration operator", cachev1alpha1.MemcachedSpec{Tolerations: []tol{{Key: "dedicated", Operator: "Sometimes"}}}, "spec.tolerations[0].operator", byAPIServer},
		{"toleration Exists with a value", cachev1alpha1.MemcachedSpec{Tolerations: []tol{{Key: "a", Operator: "Exists", Value: "b"}}}, "value must be empty with operator Exists", byAPIServer},
		{"toleration without key nor Exists", cachev1alpha1.MemcachedSpec{Tolerations: []tol{{Operator: "Equal", Value: "b"}}}, "key may be empty only with operator Exists", byAPIServer},
		{"toleration seconds without NoExecute", cachev1alpha1.MemcachedSpec{Tolerations: []tol{{Key: "a", Operator: "Exists", Effect: "NoSchedule", TolerationSeconds: ptr.To[int64](5)}}}, "tolerationSeconds needs effect NoExecute", byAPIServer},
		{"toleration effect", cachev1alpha1.MemcachedSpec{Tolerations: []tol{{Key: "a", Operator: "Exists", Effect: "NoRun"}}}, "spec.tolerations[0].effect", byAPIServer},
		{"toleration key", cachev1alpha1.MemcachedSpec{Tolerations: []tol{{Key: "bad key!", Operator: "Exists"}}}, "spec.tolerations[0].key", byAPIServer},
		{"toleration value", cachev1alpha1.MemcachedSpec{Tolerations: []tol{{Key: "a", Value: lv(strings.Repeat("v", 64))}}}, "spec.tolerations[0].value", byAPIServer},
		{"node selector key", cachev1alpha1.MemcachedSpec{NodeSelector: map[string]lv{"bad key": "x"}}, "nodeSelector keys must be label keys", byAPIServer},
		{"node selector value", cachev1alpha1.MemcachedSpec{NodeSelector: map[string]lv{"disk": "-ssd"}}, "spec.nodeSelector.disk", byAPIServer},
		{"spread skew", cachev1alpha1.MemcachedSpec{TopologySpreadConstraints: []tsc{{MaxSkew: 0, TopologyKey: "zone", WhenUnsatisfiable: "DoNotSchedule"}}}, "spec.topologySpreadConstraints[0].maxSkew", byAPIServer},
		{"spread action", cachev1alpha1.MemcachedSpec{TopologySpreadConstraints: []tsc{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: "Maybe"}}}, "spec.topologySpreadConstraints[0].whenUnsatisfiable", byAPIServer},
		{"spread min domains", cachev1alpha1.MemcachedSpec{TopologySpreadConstraints: []tsc{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: "ScheduleAnyway", MinDomains: ptr.To[int32](2)}}}, "minDomains needs whenUnsatisfiable DoNotSchedule", byAPIServer},
		{"spread twice", cachev1alpha1.MemcachedSpec{TopologySpreadConstraints: []tsc{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: "DoNotSchedule"}, {MaxSkew: 2, TopologyKey: "zone", WhenUnsatisfiable: "DoNotSchedule"}}}, "each pair of topologyKey and whenUnsatisfiable may appear once", byOperator}, // server-side apply keys the list by that pair and keeps one
		{"spread match keys without selector", cachev1alpha1.MemcachedSpec{TopologySpreadConstraints: []tsc{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: "DoNotSchedule", MatchLabelKeys: []cachev1alpha1.LabelKey{"pod-template-hash"}}}}, "matchLabelKeys needs a labelSelector", byAPIServer},
		{"spread policy", cachev1alpha1.MemcachedSpec{TopologySpreadConstraints: []tsc{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: "DoNotSchedule", NodeTaintsPolicy: ptr.To("Sometimes")}}}, "spec.topologySpreadConstraints[0].nodeTaintsPolicy", byAPIServer},
		{"spread selector operator", cachev1alpha1.MemcachedSpec{TopologySpreadConstraints: []tsc{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: "DoNotSchedule", LabelSelector: &cachev1alpha1.LabelSelector{MatchExpressions: []lsr{{Key: "app", Operator: "Like"}}}}}}, "operator", byAPIServer},
		{"spread selector values", cachev1alpha1.MemcachedSpec{TopologySpreadConstraints: []tsc{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: "DoNotSchedule", LabelSelector: &cachev1alpha1.LabelSelector{MatchExpressions: []lsr{{Key: "app", Operator: "In"}}}}}}, "values must be set with operator In or NotIn", byAPIServer},
		{"no node selector term", cachev1alpha1.MemcachedSpec{Affinity: &cachev1alpha1.Affinity{NodeAffinity: &cachev1alpha1.NodeAffinity{Required: &cachev1alpha1.NodeSelector{}}}}, "nodeSelectorTerms", byAPIServer},
		{"node affinity In without values", cachev1alpha1.MemcachedSpec{Affinity: requiredNode(nsr{Key: "pool", Operator: "In"})}, "values must be set with operator In or NotIn", byAPIServer},
		{"node affinity Exists with values", cachev1alpha1.MemcachedSpec{Affinity: requiredNode(nsr{Key: "pool", Operator: "Exists", Values: []string{"a"}})}, "empty with Exists or DoesNotExist", byAPIServer},
		{"node affinity Gt with two values", cachev1alpha1.MemcachedSpec{Affinity: requiredNode(nsr{Key: "cpus", Operator: "Gt", Values: []string{"1", "2"}})}, "one value with Gt or Lt", byAPIServer},
		{"node affinity operator", cachev1alpha1.MemcachedSpec{Affinity: requiredNode(nsr{Key: "pool", Operator: "Like", Values: []string{"a"}})}, "operator", byAPIServer},
		{"node affinity value", cachev1alpha1.MemcachedSpec{Affinity: requiredNode(nsr{Key: "pool", Operator: "In", Values: []string{"not a label value"}})}, "values of required node affinity expressions must be label values", byAPIServer},
		{"node affinity field", cachev1alpha1.MemcachedSpec{Affinity: &cachev1alpha1.Affinity{NodeAffinity: &cachev1alpha1.NodeAffinity{Required: &cachev1alpha1.NodeSelector{NodeSelectorTerms: []cachev1alpha1.NodeSelectorTerm{{MatchFields: []nsr{{Key: "metadata.labels", Operator: "In", Values: []string{"a"}}}}}}}}}, "matchFields may only select metadata.name", byAPIServer},
		{"preferred weight", cachev1alpha1.MemcachedSpec{Affinity: &cachev1alpha1.Affinity{NodeAffinity: &cachev1alpha1.NodeAffinity{Preferred: []cachev1alpha1.PreferredSchedulingTerm{{Weight: 0, Preference: cachev1alpha1.NodeSelectorTerm{}}}}}}, "weight", byAPIServer},
		{"pod affinity topology key", cachev1alpha1.MemcachedSpec{Affinity: podAffinity(term{LabelSelector: selector, TopologyKey: ""})}, "topologyKey", byAPIServer},
		{"pod affinity match keys without selector", cachev1alpha1.MemcachedSpec{Affinity: podAffinity(term{TopologyKey: "zone", MatchLabelKeys: []cachev1alpha1.LabelKey{"a"}})}, "matchLabelKeys and mismatchLabelKeys need a labelSelector", byAPIServer},
		{"pod affinity namespace", cachev1alpha1.MemcachedSpec{Affinity: podAffinity(term{LabelSelector: selector, TopologyKey: "zone", Namespaces: []string{"Bad_NS"}})}, "namespaces", byAPIServer},
		{"resource claims", cachev1alpha1.MemcachedSpec{Resources: &corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}, "claims cannot be used", byAPIServer},
		{"pod label key", cachev1alpha1.MemcachedSpec{PodLabels: map[string]lv{"bad key": "x"}}, "podLabels keys must be label keys", byAPIServer},
		{"pod label value", cachev1alpha1.MemcachedSpec{PodLabels: map[string]lv{"team": "-x"}}, "spec.podLabels.team", byAPIServer},
		{"pod annotation key", cachev1alpha1.MemcachedSpec{PodAnnotations: map[string]cachev1alpha1.AnnotationValue{"bad key": "x"}}, "podAnnotations keys must be annotation keys", byAPIServer},
		{"priority class", cachev1alpha1.MemcachedSpec{PriorityClassName: "Critical"}, "spec.priorityClassName", byAPIServer},
		{"scrape interval", cachev1alpha1.MemcachedSpec{Monitoring: &cachev1alpha1.MonitoringSpec{Enabled: true, Interval: "5 minutes"}}, "spec.monitoring.interval", byAPIServer},
		{"service monitor label key", cachev1alpha1.MemcachedSpec{Monitoring: &cachev1alpha1.MonitoringSpec{Enabled: true, ServiceMonitorLabels: map[string]lv{"bad key": "x"}}}, "serviceMonitorLabels keys must be label keys", byAPIServer},
		{"item size below 512Ki", cachev1alpha1.MemcachedSpec{MaxItemSize: "100Ki"}, "maxItemSize must be a multiple of 512Ki", byMemcached},
		{"item size not a multiple of 512Ki", cachev1alpha1.MemcachedSpec{MaxItemSize: "1000Ki"}, "maxItemSize must be a multiple of 512Ki", byMemcached},
		{"item size above 1Gi", cachev1alpha1.MemcachedSpec{MaxItemSize: "2Gi", MemoryLimitMiB: ptr.To[int32](8192)}, "maxItemSize must be a multiple of 512Ki between 512Ki and 1Gi", byMemcached},
		{"item size above half the default memory", cachev1alpha1.MemcachedSpec{MaxItemSize: "33Mi"}, "maxItemSize must be at most half of memoryLimitMiB", byMemcached},
		{"item size above half the memory", cachev1alpha1.MemcachedSpec{MaxItemSize: "8Mi", MemoryLimitMiB: ptr.To[int32](8)}, "spec.maxItemSize: Invalid value", byMemcached},
		{"item size without unit", cachev1alpha1.MemcachedSpec{MaxItemSize: "1048576"}, "spec.maxItemSize", byOperator},
		{"pod label selecting the pods", cachev1alpha1.MemcachedSpec{PodLabels: map[string]lv{desired.LabelInstance: "other"}}, "podLabels must not set", byOperator},
		{"verbosity 3", cachev1alpha1.MemcachedSpec{Verbosity: ptr.To[int32](3)}, "spec.verbosity", byOperator},
		{"empty pull secret", cachev1alpha1.MemcachedSpec{ImagePullSecrets: []cachev1alpha1.ImagePullSecret{{Name: ""}}}, "spec.imagePullSecrets[0].name", byOperator},
		{"TLS Secret name", cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "Cache_TLS"}}, "spec.tls.secretName", byOperator}, // no Secret can have it: the pods would never start
		{"client certificate mode", cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "tls", ClientCertificates: "Maybe"}}, "spec.tls.clientCertificates", byOperator},
		{"auth Secret name", cachev1alpha1.MemcachedSpec{Auth: &cachev1alpha1.AuthSpec{SecretName: "Users!"}}, "spec.auth.secretName", byOperator},                                                                                                   // no Secret can have it: the pods would never start
		{"auth key", cachev1alpha1.MemcachedSpec{Auth: &cachev1alpha1.AuthSpec{SecretName: "users", Key: "a/b"}}, "spec.auth.key", byOperator},                                                                                                       // no Secret can have it: the pods would never start
		{"auth key ..", cachev1alpha1.MemcachedSpec{Auth: &cachev1alpha1.AuthSpec{SecretName: "users", Key: "..x"}}, "key must not be '.' nor start with '..'", byOperator},                                                                          // no Secret can have it: the pods would never start
		{"memcached on the exporter's port", cachev1alpha1.MemcachedSpec{ContainerPort: ptr.To(desired.MetricsPort), Monitoring: &cachev1alpha1.MonitoringSpec{Enabled: true}}, "containerPort must not be 9150 while monitoring is on", byOperator}, // the Deployment is admitted with a warning ("duplicate port definition"); memcached and the exporter cannot both listen on it
		{"auth with monitoring", cachev1alpha1.MemcachedSpec{Auth: &cachev1alpha1.AuthSpec{SecretName: "users"}, Monitoring: &cachev1alpha1.MonitoringSpec{Enabled: true}}, "auth and monitoring cannot be on together", byOperator},                 // the exporter would fail every scrape
		{"pod annotation of the operator", cachev1alpha1.MemcachedSpec{PodAnnotations: map[string]cachev1alpha1.AnnotationValue{desired.AnnotationTLSDigest: "x"}}, "podAnnotations must not set keys under cache.example.com/", byOperator},
		{"network policy client selecting nothing", cachev1alpha1.MemcachedSpec{NetworkPolicy: clients(cachev1alpha1.NetworkPolicyPeer{})}, "set podSelector, namespaceSelector or both", byAPIServer},
		{"network policy client label key", cachev1alpha1.MemcachedSpec{NetworkPolicy: clients(cachev1alpha1.NetworkPolicyPeer{PodSelector: &cachev1alpha1.LabelSelector{MatchLabels: map[string]lv{"bad key": "x"}}})}, "matchLabels keys must be label keys", byAPIServer},
		{"network policy client label value", cachev1alpha1.MemcachedSpec{NetworkPolicy: clients(cachev1alpha1.NetworkPolicyPeer{NamespaceSelector: &cachev1alpha1.LabelSelector{MatchLabels: map[string]lv{"team": "-x"}}})}, "spec.networkPolicy.clients[0].namespaceSelector.matchLabels.team", byAPIServer},
		{"network policy metrics client expression", cachev1alpha1.MemcachedSpec{Monitoring: &cachev1alpha1.MonitoringSpec{Enabled: true}, NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true,
			MetricsClients: []cachev1alpha1.NetworkPolicyPeer{{NamespaceSelector: &cachev1alpha1.LabelSelector{MatchExpressions: []lsr{{Key: "team", Operator: "In"}}}}}}}, "values must be set with operator In or NotIn", byAPIServer},
		{"memory request above limit", cachev1alpha1.MemcachedSpec{Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		}}, "", byAPIServer},
	}
	ctx := context.Background()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m := &cachev1alpha1.Memcached{
				ObjectMeta: metav1.ObjectMeta{Namespace: fuzzNamespace(), Name: "refused-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)},
				Spec:       tt.spec,
			}
			err := env.Client.Create(ctx, m.DeepCopy())
			if tt.message == "" {
				// The one refusal the CRD leaves to the apiserver (see below).
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
				g.Expect(err.Error()).To(ContainSubstring(tt.message))
			}
			if tt.by != byAPIServer {
				return
			}
			expectObjectsBuiltFromItRefused(t, m, tt.name)
		})
	}
}

// The rows the apiserver refuses only from a Kubernetes minor version
// on: an older one accepts an object built from them, and the CRD's
// refusal is then the operator's alone, for the reason given.
var refusedSince = map[string]int{
	// Required node affinity values are validated as label values from
	// 1.32; before, such a value matches no node and the pods never
	// schedule.
	"node affinity value": 32,
	// Before 1.31 (gate MatchLabelKeysInPodAffinity off) the apiserver
	// drops matchLabelKeys and mismatchLabelKeys of pod affinity terms,
	// and with them what it would refuse; the CRD refuses the spec on
	// every version, as 1.31 and later do.
	"pod affinity match keys without selector": 31,
	// Before 1.34 (gate DynamicResourceAllocation off) the apiserver
	// drops resource claims; the pods would run without them.
	"resource claims": 34,
}

// Before 1.34 the apiserver does not validate a StatefulSet's pod
// template: it accepts the StatefulSet and refuses its pods, which the
// status then names (PodsForbidden, with the apiserver's message).
const statefulSetTemplatesValidatedSince = 34

// expectObjectsBuiltFromItRefused: the apiserver refuses the objects the
// operator would build from m, a spec the CRD refuses (the case name), on
// the Kubernetes versions that refuse them.
func expectObjectsBuiltFromItRefused(t *testing.T, m *cachev1alpha1.Memcached, name string) {
	g := NewWithT(t)
	ctx := context.Background()
	minor := repo.KubeMinor()
	m.UID = "00000000-0000-0000-0000-000000000002"
	m.Spec.Size = ptr.To[int32](2)
	refusals := 0
	for _, a := range dryRunClients().DryRunApply(ctx, m, testenv.Images, desired.SecretDigests{}) {
		if apierrors.IsInvalid(a.Err) {
			refusals++
		}
	}
	if since, ok := refusedSince[name]; ok && minor < since {
		g.Expect(refusals).To(BeZero(), "Kubernetes %s accepts an object built from it, refused from 1.%d", repo.KubeVersion(), since)
		return
	}
	if refusals == 0 && minor < statefulSetTemplatesValidatedSince {
		// The StatefulSet is accepted; its pods are not.
		var set appsv1.StatefulSet
		g.Expect(jsonconv.Convert(desired.StatefulSet(m, testenv.Images, desired.SecretDigests{}), &set)).To(Succeed())
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cache-0", Labels: set.Spec.Template.Labels}, Spec: set.Spec.Template.Spec}
		err := env.Client.Create(ctx, pod, client.DryRunAll)
		g.Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "Kubernetes %s accepts the StatefulSet; its pods must be refused: %v", repo.KubeVersion(), err)
		return
	}
	g.Expect(refusals).To(BeNumerically(">", 0), "the apiserver would refuse an object built from it")
}
