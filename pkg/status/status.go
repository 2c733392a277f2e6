// Package status computes a Memcached's status from what the operator
// observed, as an apply configuration holding only the fields the operator
// owns. Each condition has its own small, side-effect-free function.
package status

import (
	"fmt"
	"slices"
	"time"

	"github.com/example/memcached-operator/pkg/material"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	cacheac "github.com/example/memcached-operator/applyconfig/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

// Observation is what a reconcile saw of the world.
type Observation struct {
	// StatefulSet summarizes the Memcached's StatefulSet as last observed,
	// or is nil when it does not exist (or is not the Memcached's, see
	// NotOwned).
	StatefulSet *owned.Summary
	// Replaced summarizes the Deployment the StatefulSet replaces (the
	// Operator SDK tutorial's, or one of the operator's versions before
	// slots), while it exists; its pods serve until every slot is ready.
	Replaced *owned.Summary
	// Service is the Memcached's Service as last observed, or nil when it
	// does not exist (or is not the Memcached's).
	Service *owned.Summary
	// NotOwned lists the kinds of which an object with the Memcached's name
	// exists that the Memcached does not control. The operator leaves such
	// objects alone.
	NotOwned []owned.Kind
	// Replacing says where the replacement of the Memcached's Deployment
	// by its StatefulSet stands, while the operator replaces one.
	Replacing string
	// TakeOverDisabled is why the Memcached's Deployment, which another
	// operator made, is not replaced: the operator may not take over.
	// Empty otherwise.
	TakeOverDisabled string
	// RestartingForReload: the pod template asks for the pods to restart
	// for the Secrets' content of now, because a pod could not load it in
	// place: a rollout under way is that restart.
	RestartingForReload bool
	// Moving says where a move of keys stands (spec.keyMoves), while one is
	// under way; empty otherwise.
	Moving string
	// Unpublished says why no membership is published yet, while a new
	// Memcached with spec.keyMoves waits for its slots: its clients find no
	// server. Empty otherwise.
	Unpublished string
	// CreateFailed is why the StatefulSet controller last failed to create
	// a pod (its FailedCreate event: a ResourceQuota, an admission policy),
	// while pods are missing; empty otherwise.
	CreateFailed string
	// Secret is why a Secret the Memcached names cannot be used, if one
	// cannot; the operator then holds the StatefulSet as it is.
	Secret *SecretProblem
	// Failed are the failures of the reconcile's phases: the apiserver's
	// refusal of an object the operator applied, or any other error making
	// it. Each names its object.
	Failed []error
	// Monitor is where the Memcached's ServiceMonitor stands; MonitorOff
	// without spec.monitoring.
	Monitor Monitor
	// Image is the memcached image the operator gives the pods.
	Image string
	// StatefulSetChanged: the operator created or changed the StatefulSet
	// in the reconcile that observed this; its controller has not reported
	// on the change yet.
	StatefulSetChanged bool
	// Pods are the Memcached's pods as last observed, summarized to what
	// tells why they are not ready.
	Pods []*owned.Pod
	// Discovery: the Memcached's membership is published for its pods'
	// discovery endpoint.
	Discovery bool
	// Certificate is memcached's certificate (spec.tls), valid now for the
	// Service's name; nil without TLS or when the Secret has a problem.
	Certificate *material.Certificate
	// Rolling is what the operator does to roll the pods, where it rolls
	// them (memcached warm): which pod restarts in place or is replaced,
	// or what the next slot waits for.
	Rolling string
	// RollingEmpties: the rollout restarts memcached empty or replaces a
	// pod, whose cache is then lost; the status says so beforehand.
	RollingEmpties bool
	// Autoscaling is what spec.autoscaling decided last and would do
	// next; nil without spec.autoscaling, or before its first reading.
	Autoscaling *cacheac.AutoscalingStatusApplyConfiguration
}

// SecretProblem is why a Secret a Memcached names cannot be used.
type SecretProblem struct {
	// Reason is ReasonSecretMissing, ReasonSecretInvalid or
	// ReasonSecretUnreadable.
	Reason string
	// Message names the Secret and says what is wrong, never what it holds.
	Message string
}

// Monitor is where a Memcached's ServiceMonitor stands.
type Monitor int

const (
	// MonitorOff: monitoring is not enabled.
	MonitorOff Monitor = iota
	// MonitorReady: the ServiceMonitor exists.
	MonitorReady
	// MonitorCRDMissing: the cluster has no ServiceMonitor CRD.
	MonitorCRDMissing
	// MonitorNotOwned: a ServiceMonitor of that name is not the Memcached's.
	MonitorNotOwned
)

// notOwned tells whether an object of kind with the Memcached's name is in the way.
func (o Observation) notOwned(kind owned.Kind) bool {
	return slices.Contains(o.NotOwned, kind)
}

// Status is the status m should have given obs. conditions whose status is
// unchanged keep their lastTransitionTime from m; the others get now.
func Status(m *cachev1alpha1.Memcached, obs Observation, now metav1.Time) *cacheac.MemcachedStatusApplyConfiguration {
	st := cacheac.MemcachedStatus().
		WithObservedGeneration(m.Generation).
		WithSelector(metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: desired.SelectorLabels(m)}))
	if obs.Image != "" {
		st.WithImage(obs.Image)
	}
	// Zero counts are left out rather than sent as 0: the API omits zero
	// values, so the stored object would never show a 0 to compare with, and
	// a field the operator stops sending is removed, which reads as 0.
	if d := obs.StatefulSet; d != nil {
		if d.Status.Replicas > 0 {
			st.WithReplicas(d.Status.Replicas)
		}
		if d.Status.ReadyReplicas > 0 {
			st.WithReadyReplicas(d.Status.ReadyReplicas)
		}
	}
	if svc := obs.Service; svc != nil {
		if port, ok := servicePort(svc); ok {
			st.WithService(cacheac.ServiceStatus().
				WithName(svc.Name).
				WithPort(port).
				WithAddress(desired.Address(svc.Name, svc.Namespace, port)))
		}
	}
	if obs.Discovery {
		st.WithDiscovery(cacheac.DiscoveryStatus().WithAddress(desired.DiscoveryAddress(m)))
	}
	if c := obs.Certificate; c != nil {
		tls := cacheac.TLSStatus().WithNotAfter(metav1.NewTime(c.NotAfter.UTC()))
		if c.ExpiresSoon(now.Time) {
			tls.WithExpiresSoon(true)
		}
		st.WithTLS(tls)
	}
	if obs.Autoscaling != nil {
		st.WithAutoscaling(obs.Autoscaling)
	}
	for _, c := range conditions(m, obs) {
		st.WithConditions(conditionApplyConfiguration(c, m.Status.Conditions, m.Generation, now))
	}
	return st
}

// CertificateExpiring is the Warning event's message when c, m's
// certificate, expires soon now and m's status did not say so of it yet;
// empty when there is nothing new to tell.
func CertificateExpiring(m *cachev1alpha1.Memcached, c *material.Certificate, now time.Time) string {
	if c == nil || !c.ExpiresSoon(now) {
		return ""
	}
	if prev := m.Status.TLS; prev != nil && prev.ExpiresSoon && prev.NotAfter.Time.Equal(c.NotAfter.Truncate(time.Second)) {
		return ""
	}
	return fmt.Sprintf("The certificate of Secret %s expires at %s, in %s: it should have been renewed by now (cert-manager renews a third of a certificate's lifetime ahead: look at its Certificate and CertificateRequest)",
		m.Spec.TLS.SecretName, c.NotAfter.UTC().Format(time.RFC3339), c.NotAfter.Sub(now).Round(time.Minute))
}

func servicePort(svc *owned.Summary) (int32, bool) {
	for _, p := range svc.Ports {
		if p.Name == desired.PortName {
			return p.Port, true
		}
	}
	return 0, false
}

// conditions are the conditions the operator owns, without times or generation.
func conditions(m *cachev1alpha1.Memcached, obs Observation) []metav1.Condition {
	cs := []metav1.Condition{
		available(m, obs),
		progressing(m, obs),
		degraded(m, obs),
		reconciling(m, obs),
		Stalled(m, obs),
	}
	if obs.Monitor != MonitorOff {
		cs = append(cs, monitored(m, obs))
	}
	return cs
}

// monitored tells whether Prometheus has what it needs to scrape the
// exporter: the Memcached's ServiceMonitor.
func monitored(m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	c := metav1.Condition{Type: cachev1alpha1.ConditionMonitored}
	switch obs.Monitor {
	case MonitorReady:
		c.Status, c.Reason = metav1.ConditionTrue, cachev1alpha1.ReasonServiceMonitorReady
		c.Message = fmt.Sprintf("ServiceMonitor %s scrapes port %s of Service %s", m.Name, desired.MetricsPortName, m.Name)
	case MonitorNotOwned:
		c.Status, c.Reason = metav1.ConditionFalse, cachev1alpha1.ReasonServiceMonitorNotOwned
		c.Message = notOwnedMessage(owned.KindServiceMonitor, m.Name)
	default:
		c.Status, c.Reason = metav1.ConditionFalse, cachev1alpha1.ReasonServiceMonitorCRDMissing
		c.Message = MissingCRDMessage(m)
	}
	return c
}

// MissingCRDMessage says what a Memcached with monitoring gets in a cluster
// without the ServiceMonitor CRD: the monitored condition's message, and
// the event's.
func MissingCRDMessage(m *cachev1alpha1.Memcached) string {
	return fmt.Sprintf("The cluster had no ServiceMonitor CRD (monitoring.coreos.com/v1) when the operator started: the exporter serves metrics on port %s of Service %s, and no ServiceMonitor is made. Install the Prometheus Operator and restart the operator", desired.MetricsPortName, m.Name)
}

func conditionApplyConfiguration(c metav1.Condition, existing []metav1.Condition, generation int64, now metav1.Time) *metav1ac.ConditionApplyConfiguration {
	t := now
	if old := meta.FindStatusCondition(existing, c.Type); old != nil && old.Status == c.Status {
		t = old.LastTransitionTime
	}
	return metav1ac.Condition().
		WithType(c.Type).
		WithStatus(c.Status).
		WithReason(c.Reason).
		WithMessage(c.Message).
		WithObservedGeneration(generation).
		WithLastTransitionTime(t)
}

const (
	rolloutPending phase = iota // no StatefulSet observed yet
	rolloutInProgress
	rolloutReplacing // the Memcached's Deployment is being replaced
	rolloutComplete
	rolloutBlocked // something needs a person: see rollout.reason
)
