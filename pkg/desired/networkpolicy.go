package desired

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// MetricsNamespaceLabel and MetricsNamespaceValue label the namespaces
// whose pods may scrape the exporter when a Memcached's NetworkPolicy names
// no metrics clients: the label the operator's own metrics NetworkPolicy
// admits (manifests/network-policy).
const (
	MetricsNamespaceLabel = "metrics"
	MetricsNamespaceValue = "enabled"
)

// WantsNetworkPolicy tells whether m asks for a NetworkPolicy.
func WantsNetworkPolicy(m *cachev1alpha1.Memcached) bool {
	return m.Spec.NetworkPolicy != nil && m.Spec.NetworkPolicy.Enabled
}

// NetworkPolicy admits to m's pods, and only for ingress, the clients m
// names on memcached's port (every pod of m's namespace when it names
// none) and, with monitoring on, its metrics clients on the exporter's
// port (every pod of the namespaces labelled metrics: enabled when it
// names none). Nothing else reaches the pods; what they send is not
// restricted. The ports are numbers: every NetworkPolicy implementation
// matches those, not all match named ports.
//
// m must want one (WantsNetworkPolicy).
func NetworkPolicy(m *cachev1alpha1.Memcached) *networkingv1ac.NetworkPolicyApplyConfiguration {
	np := m.Spec.NetworkPolicy
	clients := peers(np.Clients)
	if len(clients) == 0 {
		clients = append(clients, networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector()))
	}
	spec := networkingv1ac.NetworkPolicySpec().
		WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m))).
		WithPolicyTypes(networkingv1.PolicyTypeIngress).
		WithIngress(ingressRule(port(m), clients))
	if RunsExporter(m) {
		scrapers := peers(np.MetricsClients)
		if len(scrapers) == 0 {
			scrapers = append(scrapers, networkingv1ac.NetworkPolicyPeer().WithNamespaceSelector(
				metav1ac.LabelSelector().WithMatchLabels(map[string]string{MetricsNamespaceLabel: MetricsNamespaceValue})))
		}
		spec.WithIngress(ingressRule(MetricsPort, scrapers))
	}
	return networkingv1ac.NetworkPolicy(m.Name, m.Namespace).
		WithLabels(Labels(m)).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(spec)
}

// ingressRule admits from to the TCP port.
func ingressRule(port int32, from []*networkingv1ac.NetworkPolicyPeerApplyConfiguration) *networkingv1ac.NetworkPolicyIngressRuleApplyConfiguration {
	return networkingv1ac.NetworkPolicyIngressRule().
		WithPorts(networkingv1ac.NetworkPolicyPort().
			WithProtocol(corev1.ProtocolTCP).
			WithPort(intstr.FromInt32(port))).
		WithFrom(from...)
}

// peers are the NetworkPolicy peers of a Memcached's clients, as written.
func peers(in []cachev1alpha1.NetworkPolicyPeer) []*networkingv1ac.NetworkPolicyPeerApplyConfiguration {
	out := make([]*networkingv1ac.NetworkPolicyPeerApplyConfiguration, 0, len(in))
	for i := range in {
		p := networkingv1ac.NetworkPolicyPeer()
		if s := in[i].PodSelector; s != nil {
			p.WithPodSelector(passThrough[metav1ac.LabelSelectorApplyConfiguration](s))
		}
		if s := in[i].NamespaceSelector; s != nil {
			p.WithNamespaceSelector(passThrough[metav1ac.LabelSelectorApplyConfiguration](s))
		}
		out = append(out, p)
	}
	return out
}
