package desired

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// Service is the headless Service of m: named after m, selecting exactly
// m's pods, with the memcached port named PortName. Being headless, its name
// resolves to the address of every ready pod, which is what memcached
// clients want (they spread keys across servers themselves).
//
// It names each slot of m's StatefulSet (<pod>.<name>.<namespace>.svc).
// While replacing is true (a Deployment of an earlier version of the
// operator is being replaced) it selects that Deployment's pods too.
//
// With monitoring on, it exposes the exporter's port too, which a
// ServiceMonitor scrapes.
func Service(m *cachev1alpha1.Memcached, replacing bool) *corev1ac.ServiceApplyConfiguration {
	spec := corev1ac.ServiceSpec().
		WithClusterIP(corev1.ClusterIPNone).
		WithSelector(servingSelector(m, replacing)).
		WithPorts(corev1ac.ServicePort().
			WithName(PortName).
			WithProtocol(corev1.ProtocolTCP).
			WithPort(port(m)).
			WithTargetPort(intstr.FromString(PortName)))
	if RunsExporter(m) {
		spec.WithPorts(corev1ac.ServicePort().
			WithName(MetricsPortName).
			WithProtocol(corev1.ProtocolTCP).
			WithPort(MetricsPort).
			WithTargetPort(intstr.FromString(MetricsPortName)))
	}
	return corev1ac.Service(m.Name, m.Namespace).
		WithLabels(Labels(m)).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(spec)
}

// Address is where a client in the cluster reaches a Service's port:
// "<name>.<namespace>.svc:<port>", resolved through the cluster's DNS
// search path whatever the cluster domain.
func Address(name, namespace string, port int32) string {
	return ServiceHost(name, namespace) + ":" + strconv.Itoa(int(port))
}

// ServiceHost is the name clients in the cluster reach a Service by,
// "<name>.<namespace>.svc", and the name memcached's certificate must
// carry for clients that verify it.
func ServiceHost(name, namespace string) string {
	return name + "." + namespace + ".svc"
}
