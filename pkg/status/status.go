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

// phase is where the StatefulSet's rollout stands.
type phase int

const (
	rolloutPending phase = iota // no StatefulSet observed yet
	rolloutInProgress
	rolloutReplacing // the Memcached's Deployment is being replaced
	rolloutComplete
	rolloutBlocked // something needs a person: see rollout.reason
)

// rollout is where the StatefulSet's rollout stands, and why.
type rollout struct {
	phase phase
	// reason is the conditions' reason when the rollout is blocked.
	reason  string
	message string
}

// rolloutOf ranks what stands in the way of m's rollout, first what
// blocks it: the StatefulSet not being m's, then a Secret, then a failed
// phase, then the other objects not being m's.
func rolloutOf(m *cachev1alpha1.Memcached, obs Observation) rollout {
	blockedBy := func(kind owned.Kind) rollout {
		name := m.Name
		if kind == owned.KindConfigMap {
			name = desired.MembershipName(m.Name)
		}
		return rollout{rolloutBlocked, NotOwnedReason(kind), notOwnedMessage(kind, name)}
	}
	switch {
	case obs.notOwned(owned.KindStatefulSet):
		return blockedBy(owned.KindStatefulSet)
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
	case obs.StatefulSet == nil:
		return rollout{phase: rolloutPending, message: fmt.Sprintf("Waiting for StatefulSet %s to be created", m.Name)}
	case obs.Moving != "":
		// Every slot's pod is ready while keys move: a leaving slot's
		// serves until they have.
		return rollout{rolloutInProgress, cachev1alpha1.ReasonMovingKeys, obs.Moving}
	}
	d := obs.StatefulSet
	want := desired.Replicas(m)
	r := statefulSetRollout(d, want)
	if r.phase == rolloutComplete {
		// A pod restarted in place is updated and ready from the moment
		// its images change until the kubelet stops memcached: the
		// rollout ends once the restart is confirmed.
		for _, p := range obs.Pods {
			if p.RestartingFrom != "" {
				return rollout{phase: rolloutInProgress, message: fmt.Sprintf("%s; memcached is restarting in place in pod %s", r.message, p.Name)}
			}
		}
		return r
	}
	// Why the rollout does not get on, as the kubelet, the scheduler or
	// the StatefulSet controller says, before the StatefulSet's own count.
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
			return r
		}
	}
	if obs.RestartingForReload {
		// The pod that said so is gone: its slot restarts first.
		r.reason = cachev1alpha1.ReasonReloadFailed
		r.message = "A pod could not load the new Secret content in place; the pods restart one at a time to mount it: " + r.message
	}
	if obs.Rolling != "" {
		r.message += "; " + obs.Rolling
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

// statefulSetRollout is where d's rollout to want replicas stands, as the
// StatefulSet's status tells.
func statefulSetRollout(d *owned.Summary, want int32) rollout {
	inProgress := func(format string, args ...any) rollout {
		return rollout{phase: rolloutInProgress, message: fmt.Sprintf(format, args...)}
	}
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return inProgress("StatefulSet %s has changes its controller has not observed yet", d.Name)
	case d.Replicas != nil && *d.Replicas != want:
		return inProgress("StatefulSet %s has %d replicas desired, the Memcached asks for %d", d.Name, *d.Replicas, want)
	case st.Replicas > want:
		return inProgress("%d pods of removed slots pending termination", st.Replicas-want)
	case st.UpdatedReplicas < want:
		return inProgress("%d of %d pods updated", st.UpdatedReplicas, want)
	case st.AvailableReplicas < want:
		return inProgress("%d of %d pods available", st.AvailableReplicas, want)
	case st.UpdateRevision != "" && st.CurrentRevision != st.UpdateRevision && !d.OnDelete:
		return inProgress("StatefulSet %s is completing its rollout", d.Name)
	}
	return rollout{phase: rolloutComplete, message: fmt.Sprintf("%d of %d pods updated and available", st.AvailableReplicas, want)}
}

// NotOwnedReason is the reason, of the conditions and of the event, when
// an object of kind with the Memcached's name is not the Memcached's.
func NotOwnedReason(kind owned.Kind) string {
	d, _ := owned.Describe(kind)
	return d.NotOwnedReason()
}

// rollingOut tells whether the StatefulSet is on its way to what m asks
// for with nothing in the way: the rollout is neither complete, blocked,
// nor replacing a Deployment, and the StatefulSet exists.
func rollingOut(m *cachev1alpha1.Memcached, obs Observation) bool {
	return rolloutOf(m, obs).phase == rolloutInProgress
}

func notOwnedMessage(kind owned.Kind, name string) string {
	return fmt.Sprintf("%s %s exists and is not controlled by this Memcached; the operator leaves it alone. Delete or rename it, or rename the Memcached", kind, name)
}

// available is True when at least all but one of m's slots serve (one at
// a time is what a rollout or a node drain takes away), and at least one:
// counting, while the StatefulSet replaces a Deployment, the pods of the
// Deployment that still serve. True when size is 0.
func available(m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	c := metav1.Condition{Type: cachev1alpha1.ConditionAvailable}
	want := desired.Replicas(m)
	ready := int32(0)
	if d := obs.StatefulSet; d != nil {
		ready = d.Status.AvailableReplicas
	}
	msg := fmt.Sprintf("%d of %d pods ready", ready, want)
	if r := obs.Replaced; r != nil && r.DeploymentStatus.AvailableReplicas > 0 {
		ready += r.DeploymentStatus.AvailableReplicas
		msg = fmt.Sprintf("%d of %d slots ready; %d pods of Deployment %s serve", ready-r.DeploymentStatus.AvailableReplicas, want, r.DeploymentStatus.AvailableReplicas, r.Name)
	}
	switch {
	case obs.StatefulSet == nil && obs.Replaced == nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, cachev1alpha1.ReasonStatefulSetPending, "No StatefulSet of this Memcached exists"
		switch {
		case obs.notOwned(owned.KindStatefulSet):
			c.Reason = cachev1alpha1.ReasonStatefulSetNotOwned
		case obs.Secret != nil:
			c.Reason, c.Message = obs.Secret.Reason, obs.Secret.Message
		}
	case want == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, cachev1alpha1.ReasonScaledToZero, "Size is 0: no pods are requested"
	case ready >= max(1, want-1):
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, cachev1alpha1.ReasonMinimumReplicasAvailable, msg
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, cachev1alpha1.ReasonMinimumReplicasUnavailable, msg
		if p := podProblemOf(m, obs); p != nil {
			c.Reason, c.Message = p.reason, msg+": "+p.message
		}
	}
	return c
}

// progressing is True while the StatefulSet rolls out or scales.
func progressing(m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	return rolloutCondition(cachev1alpha1.ConditionProgressing, m, obs)
}

// reconciling is the kstatus condition: True while the StatefulSet has not
// reached the desired state and is still making progress. It says what
// progressing says, under the name kstatus readers look for.
func reconciling(m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	return rolloutCondition(cachev1alpha1.ConditionReconciling, m, obs)
}

func rolloutCondition(conditionType string, m *cachev1alpha1.Memcached, obs Observation) metav1.Condition {
	r := rolloutOf(m, obs)
	if (r.phase == rolloutPending || r.phase == rolloutInProgress) && wasReplacing(m) {
		// The StatefulSet is coming up beside the replaced Deployment.
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
	case rolloutBlocked:
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
