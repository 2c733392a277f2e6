package desired

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/autoscale"
)

// MetricsNamespaceLabel and MetricsNamespaceValue label the namespaces
// whose pods may scrape the exporter when a Memcached's NetworkPolicy names
// no metrics clients: the label the operator's own metrics NetworkPolicy
// admits (manifests/network-policy). The key is the project's own, so that
// no other tool's label (kubebuilder's scaffolds use a bare "metrics")
// admits scrapers by accident.
const (
	MetricsNamespaceLabel = "cache.example.com/metrics"
	MetricsNamespaceValue = "enabled"
)

// dnsPort is DNS's port, which the pods may reach in any namespace.
const dnsPort = 53

// OperatorPodLabels select the operator's pods, in whatever namespace it
// is installed (manifests/manager, the chart and the bundle label them so):
// with spec.autoscaling they read the signals of the memcached pods.
var OperatorPodLabels = map[string]string{
	"app.kubernetes.io/name":      "memcached-operator",
	"app.kubernetes.io/component": "manager",
}

// WantsNetworkPolicy tells whether m asks for a NetworkPolicy.
func WantsNetworkPolicy(m *cachev1alpha1.Memcached) bool {
	return m.Spec.NetworkPolicy != nil && m.Spec.NetworkPolicy.Enabled
}

// NetworkPolicy admits to m's pods, and only for ingress, the clients m
// names on memcached's port (every pod of m's namespace when it names
// none) and, with monitoring on, its metrics clients on the exporter's
// port (every pod of the namespaces labelled metrics: enabled when it
// names none). With key moves, m's own pods are clients too. Nothing
// else reaches the pods. What they send is limited to what they need: m's
// own pods on memcached's port (the key mover, package move), on the
// discovery port when a leaving pod hands its keys off, and DNS
// (port 53 of pods in any namespace); nothing leaves for an address
// outside m's pods, whatever a membership names. memcached's port is admitted by number, which every
// NetworkPolicy implementation matches, and by name, which follows each
// pod's own containerPort: while a change of spec.containerPort rolls
// out, the old pods keep serving on the old port until they are replaced
// (with an implementation that matches named ports; the others admit the
// new port only).
//
// While replacing is true (a Deployment of an earlier version of the
// operator is being replaced) it holds that Deployment's pods too.
//
// m must want one (WantsNetworkPolicy).
func NetworkPolicy(m *cachev1alpha1.Memcached, replacing bool) *networkingv1ac.NetworkPolicyApplyConfiguration {
	np := m.Spec.NetworkPolicy
	clients := peers(np.Clients)
	switch {
	case len(clients) == 0:
		clients = append(clients, networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector()))
	case MovesKeys(m):
		// The pods copy keys to one another (package move).
		clients = append(clients, networkingv1ac.NetworkPolicyPeer().WithPodSelector(
			metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m))))
	}
	toPods := []*networkingv1ac.NetworkPolicyPortApplyConfiguration{
		networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(port(m))),
		networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromString(PortName)),
	}
	if MovesKeys(m) {
		// A leaving pod asks its peers' endpoints for the membership.
		toPods = append(toPods, networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(DiscoveryPort)))
	}
	spec := networkingv1ac.NetworkPolicySpec().
		WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(servingSelector(m, replacing))).
		WithPolicyTypes(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress).
		WithIngress(ingressRule(clients, intstr.FromInt32(port(m)), intstr.FromString(PortName), intstr.FromInt32(DiscoveryPort))).
		WithEgress(
			networkingv1ac.NetworkPolicyEgressRule().
				WithTo(networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m)))).
				WithPorts(toPods...),
			networkingv1ac.NetworkPolicyEgressRule().
				WithTo(networkingv1ac.NetworkPolicyPeer().WithNamespaceSelector(metav1ac.LabelSelector())).
				WithPorts(
					networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolUDP).WithPort(intstr.FromInt32(dnsPort)),
					networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(dnsPort))))
	if RunsExporter(m) {
		scrapers := peers(np.MetricsClients)
		if len(scrapers) == 0 {
			scrapers = append(scrapers, networkingv1ac.NetworkPolicyPeer().WithNamespaceSelector(
				metav1ac.LabelSelector().WithMatchLabels(map[string]string{MetricsNamespaceLabel: MetricsNamespaceValue})))
		}
		spec.WithIngress(ingressRule(scrapers, intstr.FromInt32(MetricsPort)))
	}
	if Autoscales(m) {
		spec.WithIngress(ingressRule([]*networkingv1ac.NetworkPolicyPeerApplyConfiguration{networkingv1ac.NetworkPolicyPeer().
			WithNamespaceSelector(metav1ac.LabelSelector()).
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(OperatorPodLabels))},
			intstr.FromInt32(autoscale.SignalsPort)))
	}
	return networkingv1ac.NetworkPolicy(m.Name, m.Namespace).
		WithLabels(Labels(m)).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(spec)
}

// ingressRule admits from to the TCP ports.
func ingressRule(from []*networkingv1ac.NetworkPolicyPeerApplyConfiguration, ports ...intstr.IntOrString) *networkingv1ac.NetworkPolicyIngressRuleApplyConfiguration {
	r := networkingv1ac.NetworkPolicyIngressRule()
	for _, p := range ports {
		r.WithPorts(networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(p))
	}
	return r.WithFrom(from...)
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
