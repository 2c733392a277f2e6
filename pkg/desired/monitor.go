package desired

import (
	"maps"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1ac "github.com/prometheus-operator/prometheus-operator/pkg/client/applyconfiguration/monitoring/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// ServiceMonitor is the Prometheus Operator's ServiceMonitor of m: named
// after m and controlled by it, it scrapes the port named MetricsPortName
// of m's Service, and only of m's. It carries spec.monitoring's
// serviceMonitorLabels, for a Prometheus that selects monitors by label.
// m must have monitoring enabled.
func ServiceMonitor(m *cachev1alpha1.Memcached) *monitoringv1ac.ServiceMonitorApplyConfiguration {
	// The operator's labels win, as the CRD forbids setting them.
	labels := stringMap(m.Spec.Monitoring.ServiceMonitorLabels)
	maps.Copy(labels, Labels(m))
	endpoint := monitoringv1ac.Endpoint().WithPort(MetricsPortName)
	if m.Spec.Monitoring.Interval != "" {
		endpoint.WithInterval(monitoringv1.Duration(m.Spec.Monitoring.Interval))
	}
	return monitoringv1ac.ServiceMonitor(m.Name, m.Namespace).
		WithLabels(labels).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(monitoringv1ac.ServiceMonitorSpec().
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(m))).
			WithEndpoints(endpoint))
}
