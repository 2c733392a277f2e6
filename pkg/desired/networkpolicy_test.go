package desired

import (
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/jsonconv"
)

func TestNetworkPolicy(t *testing.T) {
	web := &cachev1alpha1.LabelSelector{MatchLabels: map[string]cachev1alpha1.LabelValue{"app": "web"}}
	team := &cachev1alpha1.LabelSelector{MatchLabels: map[string]cachev1alpha1.LabelValue{"team": "payments"}}
	prometheus := &cachev1alpha1.LabelSelector{MatchLabels: map[string]cachev1alpha1.LabelValue{"kubernetes.io/metadata.name": "monitoring"}}
	thisNamespace := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}}
	metricsNamespaces := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"cache.example.com/metrics": "enabled"}}}
	clients := []networkingv1.NetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}}},
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}}},
	}
	tests := []struct {
		name string
		spec cachev1alpha1.MemcachedSpec
		// want is, per port of an ingress rule, the rule's peers: memcached's
		// port by number and by name and the discovery endpoint's, the
		// exporter's by number.
		want map[string][]networkingv1.NetworkPolicyPeer
	}{{
		name: "clients default to the pods of the namespace",
		spec: cachev1alpha1.MemcachedSpec{NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true}},
		want: map[string][]networkingv1.NetworkPolicyPeer{"11211": {thisNamespace}, "memcached": {thisNamespace}, "11212": {thisNamespace}},
	}, {
		name: "named clients, as written, on the memcached port",
		spec: cachev1alpha1.MemcachedSpec{ContainerPort: ptr.To[int32](11311), NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true,
			Clients: []cachev1alpha1.NetworkPolicyPeer{{PodSelector: web}, {NamespaceSelector: team}, {PodSelector: web, NamespaceSelector: team}}}},
		want: map[string][]networkingv1.NetworkPolicyPeer{"11311": clients, "memcached": clients, "11212": clients},
	}, {
		name: "monitoring: metrics clients default to the namespaces labelled metrics: enabled",
		spec: cachev1alpha1.MemcachedSpec{Monitoring: &cachev1alpha1.MonitoringSpec{Enabled: true}, NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true}},
		want: map[string][]networkingv1.NetworkPolicyPeer{"11211": {thisNamespace}, "memcached": {thisNamespace}, "11212": {thisNamespace}, "9150": {metricsNamespaces}},
	}, {
		name: "monitoring: named metrics clients",
		spec: cachev1alpha1.MemcachedSpec{Monitoring: &cachev1alpha1.MonitoringSpec{Enabled: true}, NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true,
			MetricsClients: []cachev1alpha1.NetworkPolicyPeer{{NamespaceSelector: prometheus}}}},
		want: map[string][]networkingv1.NetworkPolicyPeer{"11211": {thisNamespace}, "memcached": {thisNamespace}, "11212": {thisNamespace}, "9150": {
			{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}},
		}},
	}, {
		name: "key moves: the pods are clients of one another, and a leaving pod asks its peers' endpoints",
		spec: cachev1alpha1.MemcachedSpec{KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: "node"}, NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true}},
		want: map[string][]networkingv1.NetworkPolicyPeer{"11211": {thisNamespace}, "memcached": {thisNamespace}, "11212": {thisNamespace}},
	}, {
		name: "autoscaling: the operator's pods, in any namespace, read the signals",
		spec: cachev1alpha1.MemcachedSpec{KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: "node"}, Autoscaling: &cachev1alpha1.AutoscalingSpec{MinSize: 1, MaxSize: 2},
			NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true}},
		want: map[string][]networkingv1.NetworkPolicyPeer{"11211": {thisNamespace}, "memcached": {thisNamespace}, "11212": {thisNamespace}, "11213": {{
			NamespaceSelector: &metav1.LabelSelector{},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "memcached-operator", "app.kubernetes.io/component": "manager"}},
		}}},
	}, {
		name: "metrics clients without monitoring open no port",
		spec: cachev1alpha1.MemcachedSpec{NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: true,
			MetricsClients: []cachev1alpha1.NetworkPolicyPeer{{NamespaceSelector: prometheus}}}},
		want: map[string][]networkingv1.NetworkPolicyPeer{"11211": {thisNamespace}, "memcached": {thisNamespace}, "11212": {thisNamespace}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m := memcached("cache", tt.spec)
			g.Expect(WantsNetworkPolicy(m)).To(BeTrue(), false)
			var np networkingv1.NetworkPolicy
			g.Expect(jsonconv.Convert(NetworkPolicy(m, false), &np)).To(Succeed())
			g.Expect(np.Name).To(Equal("cache"))
			g.Expect(np.Labels).To(Equal(Labels(m)))
			g.Expect(np.OwnerReferences).To(ConsistOf(HaveField("Controller", HaveValue(BeTrue()))))
			g.Expect(np.Spec.PodSelector).To(Equal(metav1.LabelSelector{MatchLabels: SelectorLabels(m)}), "exactly this instance's pods")
			g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}))
			own := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: SelectorLabels(m)}}}
			anyNamespace := []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}
			sent := map[string][]networkingv1.NetworkPolicyPeer{}
			for _, rule := range np.Spec.Egress {
				g.Expect(rule.To).NotTo(BeEmpty(), "an egress rule to anywhere")
				for _, p := range rule.Ports {
					sent[string(*p.Protocol)+"/"+p.Port.String()] = rule.To
				}
			}
			wantSent := map[string][]networkingv1.NetworkPolicyPeer{
				"TCP/" + strconv.Itoa(int(port(m))): own, "TCP/memcached": own, "UDP/53": anyNamespace, "TCP/53": anyNamespace,
			}
			if MovesKeys(m) {
				wantSent["TCP/"+strconv.Itoa(int(DiscoveryPort))] = own
			}
			g.Expect(sent).To(Equal(wantSent), "the pods send to their peers and DNS only")
			got := map[string][]networkingv1.NetworkPolicyPeer{}
			for _, rule := range np.Spec.Ingress {
				for _, p := range rule.Ports {
					g.Expect(*p.Protocol).To(BeEquivalentTo("TCP"))
					got[p.Port.String()] = rule.From
				}
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestWantsNetworkPolicy(t *testing.T) {
	for _, tt := range []struct {
		np   *cachev1alpha1.NetworkPolicySpec
		want bool
	}{{nil, false}, {&cachev1alpha1.NetworkPolicySpec{}, false}, {&cachev1alpha1.NetworkPolicySpec{Enabled: true}, true}} {
		if got := WantsNetworkPolicy(memcached("cache", cachev1alpha1.MemcachedSpec{NetworkPolicy: tt.np})); got != tt.want {
			t.Errorf("networkPolicy %+v: WantsNetworkPolicy = %v, want %v", tt.np, got, tt.want)
		}
	}
}
