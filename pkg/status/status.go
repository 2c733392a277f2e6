// Package status computes a Memcached's status from what the operator
// observed, as an apply configuration holding only the fields the operator
// owns. Each condition has its own small, side-effect-free function.
package status

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/example/memcached-operator/pkg/material"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
	// Deployment summarizes the Memcached's Deployment as last observed, or
	// is nil when it does not exist (or is not the Memcached's, see NotOwned).
	Deployment *owned.Summary
	// Service is the Memcached's Service as last observed, or nil when it
	// does not exist (or is not the Memcached's).
	Service *owned.Summary
	// NotOwned lists the kinds of which an object with the Memcached's name
	// exists that the Memcached does not control. The operator leaves such
	// objects alone.
	NotOwned []owned.Kind
	// Replacing says where the replacement of a Deployment that selects the
	// pods otherwise stands, while the operator replaces one; see also
	// Replacing().
	Replacing string
	// TakeOverDisabled is why the Memcached's Deployment, which selects
	// pods by other labels, is not replaced: the operator may not take
	// over. Empty otherwise.
	TakeOverDisabled string
	// Secret is why a Secret the Memcached names cannot be used, if one
	// cannot; the operator then holds the Deployment as it is.
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
	// DeploymentChanged: the operator created or changed the Deployment in
	// the reconcile that observed this; its controller has not reported on
	// the change yet.
	DeploymentChanged bool
	// Pods are the Memcached's pods as last observed, summarized to what
	// tells why they are not ready.
	Pods []*owned.Pod
	// Certificate is memcached's certificate (spec.tls), valid now for the
	// Service's name; nil without TLS or when the Secret has a problem.
	Certificate *material.Certificate
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
	if d := obs.Deployment; d != nil {
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
	if c := obs.Certificate; c != nil {
		tls := cacheac.TLSStatus().WithNotAfter(metav1.NewTime(c.NotAfter.UTC()))
		if c.ExpiresSoon(now.Time) {
			tls.WithExpiresSoon(true)
		}
		st.WithTLS(tls)
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

// phase is where the Deployment's rollout stands.
type phase int

const (
	rolloutPending phase = iota // no Deployment observed yet
	rolloutInProgress
	rolloutReplacing // a Deployment that selects the pods otherwise is being replaced
	rolloutComplete
	rolloutStalled
	rolloutBlocked // something needs a person: see rollout.reason
)

// rollout is where the Deployment's rollout stands, and why.
type rollout struct {
	phase phase
	// reason is the conditions' reason when the rollout is blocked.
	reason  string
	message string
}

// rolloutOf ranks what stands in the way of m's rollout, first what
// blocks it: the Deployment not being m's, then a Secret, then a failed
// phase, then the other objects not being m's.
func rolloutOf(m *cachev1alpha1.Memcached, obs Observation) rollout {
	blockedBy := func(kind owned.Kind) rollout {
		return rollout{rolloutBlocked, NotOwnedReason(kind), notOwnedMessage(kind, m.Name)}
	}
	switch {
	case obs.notOwned(owned.KindDeployment):
		return blockedBy(owned.KindDeployment)
	case obs.TakeOverDisabled != "":
		return rollout{rolloutBlocked, cachev1alpha1.ReasonTakeOverDisabled, obs.TakeOverDisabled}
	case obs.Secret != nil:
		return rollout{rolloutBlocked, obs.Secret.Reason, obs.Secret.Message}
	case len(obs.Failed) > 0:
		return rollout{rolloutBlocked, cachev1alpha1.ReasonApplyFailed, failedMessage(obs.Failed)}
	case len(obs.NotOwned) > 0:
		// In the order the phases run: Service, budget, NetworkPolicy,
		// ServiceMonitor.
		return blockedBy(obs.NotOwned[0])
	case obs.Replacing != "":
		return rollout{phase: rolloutReplacing, message: obs.Replacing}
	case obs.Deployment == nil:
		return rollout{phase: rolloutPending, message: fmt.Sprintf("Waiting for Deployment %s to be created", m.Name)}
	}
	d := obs.Deployment
	want := desired.Replicas(m)
	r := deploymentRollout(d, want)
	if r.phase == rolloutComplete {
		return r
	}
	// Why the rollout does not get on, as the kubelet, the scheduler or
	// the ReplicaSet controller says, before the Deployment's own words.
	if p := podProblemOf(m, obs); p != nil {
		if p.stalled {
			return rollout{rolloutBlocked, p.reason, p.message}
		}
		return rollout{rolloutInProgress, p.reason, p.message}
	}
	for _, p := range obs.Pods {
		if p.ReloadFailed != "" && d.RestartedFor != "" {
			r.reason = cachev1alpha1.ReasonReloadFailed
			r.message = fmt.Sprintf("Pod %s could not load the new Secret content in place (%s); the pods restart one at a time to mount it: %s",
				p.Name, p.ReloadFailed, r.message)
			break
		}
	}
	return r
}

// failedMessage names every failure, in the order of the phases that met
// them.
func failedMessage(failed []error) string {
	msgs := make([]string, len(failed))
	for i, err := range failed {
		msgs[i] = err.Error()
	}
	msg := strings.Join(msgs, "; ")
	return strings.ToUpper(msg[:1]) + msg[1:]
}

// deploymentRollout is where d's rollout to want replicas stands, as the
// Deployment's status tells.
func deploymentRollout(d *owned.Summary, want int32) rollout {
	inProgress := func(format string, args ...any) rollout {
		return rollout{phase: rolloutInProgress, message: fmt.Sprintf(format, args...)}
	}
	if c := deploymentCondition(d, appsv1.DeploymentProgressing); c != nil && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
		return rollout{rolloutStalled, cachev1alpha1.ReasonRolloutStalled, fmt.Sprintf("Deployment %s exceeded its progress deadline: %s", d.Name, c.Message)}
	}
	switch {
	case d.Status.ObservedGeneration < d.Generation:
		return inProgress("Deployment %s has changes its controller has not observed yet", d.Name)
	case d.Replicas != nil && *d.Replicas != want:
		return inProgress("Deployment %s has %d replicas desired, the Memcached asks for %d", d.Name, *d.Replicas, want)
	case d.Status.UpdatedReplicas < want:
		return inProgress("%d of %d pods updated", d.Status.UpdatedReplicas, want)
	case d.Status.Replicas > d.Status.UpdatedReplicas:
		return inProgress("%d old pods pending termination", d.Status.Replicas-d.Status.UpdatedReplicas)
	case d.Status.AvailableReplicas < d.Status.UpdatedReplicas:
		return inProgress("%d of %d updated pods available", d.Status.AvailableReplicas, d.Status.UpdatedReplicas)
	}
	return rollout{phase: rolloutComplete, message: fmt.Sprintf("%d of %d pods updated and available", d.Status.AvailableReplicas, want)}
}

// NotOwnedReason is the reason, of the conditions and of the event, when
// an object of kind with the Memcached's name is not the Memcached's.
func NotOwnedReason(kind owned.Kind) string {
	return map[owned.Kind]string{
		owned.KindDeployment:          cachev1alpha1.ReasonDeploymentNotOwned,
		owned.KindService:             cachev1alpha1.ReasonServiceNotOwned,
		owned.KindPodDisruptionBudget: cachev1alpha1.ReasonPodDisruptionBudgetNotOwned,
		owned.KindServiceMonitor:      cachev1alpha1.ReasonServiceMonitorNotOwned,
		owned.KindNetworkPolicy:       cachev1alpha1.ReasonNetworkPolicyNotOwned,
	}[kind]
}

// rollingOut tells whether the Deployment is on its way to what m asks
// for with nothing in the way: the rollout is neither complete, stalled,
// blocked, nor replacing another Deployment, and the Deployment exists.
func rollingOut(m *cachev1alpha1.Memcached, obs Observation) bool {
	return rolloutOf(m, obs).phase == rolloutInProgress
}

func notOwnedMessage(kind owned.Kind, name string) string {
	return fmt.Sprintf("%s %s exists and is not controlled by this Memcached; the operator leaves it alone. Delete or rename it, or rename the Memcached", kind, name)
}

func deploymentCondition(d *owned.Summary, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// available is True when the Deployment reports minimum availability (as
// its own available condition does), or when size is 0.
func available(m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	c := metav1.Condition{Type: cachev1alpha1.ConditionAvailable}
	d := obs.Deployment
	switch {
	case obs.Deployment == nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, cachev1alpha1.ReasonDeploymentPending, "No Deployment of this Memcached exists"
		switch {
		case obs.notOwned(owned.KindDeployment):
			c.Reason = cachev1alpha1.ReasonDeploymentNotOwned
		case obs.Secret != nil:
			c.Reason, c.Message = obs.Secret.Reason, obs.Secret.Message
		}
	case desired.Replicas(m) == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, cachev1alpha1.ReasonScaledToZero, "Size is 0: no pods are requested"
	default:
		dc := deploymentCondition(d, appsv1.DeploymentAvailable)
		msg := fmt.Sprintf("%d of %d pods ready", d.Status.ReadyReplicas, desired.Replicas(m))
		if dc != nil && dc.Status == corev1.ConditionTrue && d.Status.AvailableReplicas > 0 {
			c.Status, c.Reason, c.Message = metav1.ConditionTrue, cachev1alpha1.ReasonMinimumReplicasAvailable, msg
		} else if p := podProblemOf(m, obs); p != nil {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, p.reason, msg+": "+p.message
		} else {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, cachev1alpha1.ReasonMinimumReplicasUnavailable, msg
		}
	}
	return c
}

// progressing is True while the Deployment rolls out or scales.
func progressing(m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	return rolloutCondition(cachev1alpha1.ConditionProgressing, m, obs)
}

// reconciling is the kstatus condition: True while the Deployment has not
// reached the desired state and is still making progress. It says what
// progressing says, under the name kstatus readers look for.
func reconciling(m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	return rolloutCondition(cachev1alpha1.ConditionReconciling, m, obs)
}

func rolloutCondition(conditionType string, m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	r := rolloutOf(m, obs)
	if (r.phase == rolloutPending || r.phase == rolloutInProgress) && wasReplacing(m) {
		// The new Deployment is rolling the replaced one's pods over.
		r.phase = rolloutReplacing
	}
	c := metav1.Condition{Type: conditionType, Message: r.message}
	switch r.phase {
	case rolloutPending, rolloutInProgress:
		c.Status, c.Reason = metav1.ConditionTrue, cachev1alpha1.ReasonRollingOut
		if r.reason != "" {
			c.Reason = r.reason // why it does not get on
		}
	case rolloutReplacing:
		c.Status, c.Reason = metav1.ConditionTrue, cachev1alpha1.ReasonReplacingDeployment
	case rolloutComplete:
		c.Status, c.Reason = metav1.ConditionFalse, cachev1alpha1.ReasonRolloutComplete
	case rolloutStalled:
		c.Status, c.Reason = metav1.ConditionFalse, cachev1alpha1.ReasonRolloutStalled
	case rolloutBlocked:
		c.Status, c.Reason = metav1.ConditionFalse, r.reason
	}
	return c
}

// wasReplacing tells whether m's last status said a Deployment was being
// replaced.
func wasReplacing(m *cachev1alpha1.Memcached) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionProgressing)
	return c != nil && c.Reason == cachev1alpha1.ReasonReplacingDeployment
}

// degraded is True when the cache cannot reach its desired state by itself.
func degraded(m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	return blockedCondition(cachev1alpha1.ConditionDegraded, "Nothing is wrong", m, obs)
}

// Stalled is the kstatus condition: True when progress stopped and needs a
// person. It says what degraded says, under the name kstatus readers look for.
func Stalled(m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	return blockedCondition(cachev1alpha1.ConditionStalled, "Progress is not blocked", m, obs)
}

func blockedCondition(conditionType, fineMessage string, m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	r := rolloutOf(m, obs)
	c := metav1.Condition{Type: conditionType}
	switch r.phase {
	case rolloutStalled, rolloutBlocked:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, r.reason, r.message
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected, fineMessage
	}
	return c
}

// PodProblem is why m's pods are not ready, as Kubernetes reports it: the
// reason and message the conditions give, and false when Kubernetes
// reports nothing wrong with them.
func PodProblem(m *cachev1alpha1.Memcached, obs Observation) (reason, message string, ok bool) {
	if p := podProblemOf(m, obs); p != nil {
		return p.reason, p.message, true
	}
	return "", "", false
}
