package status

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/owned"
)

func mc(size int32) *cachev1alpha1.Memcached {
	return &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", Generation: 4},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To(size)},
	}
}

// statefulSet is a StatefulSet of generation 2 whose controller observed
// generation observed, with the given pod counts: its rollout is done when
// every pod is updated.
func statefulSet(replicas, updated, ready, available int32, observed int64) *owned.Summary {
	st := appsv1.StatefulSetStatus{
		ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated,
		ReadyReplicas: ready, AvailableReplicas: available, CurrentRevision: "cache-1", UpdateRevision: "cache-2",
	}
	if updated == replicas {
		st.CurrentRevision = st.UpdateRevision
	}
	return summary(&appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Generation: 2},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To(replicas)},
		Status:     st,
	})
}

// oldDeployment is a Deployment being replaced, with available pods.
func oldDeployment(available int32) *owned.Summary {
	return summary(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(available)},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: available, ReadyReplicas: available, AvailableReplicas: available},
	})
}

// summary is what the controller observes of obj.
func summary(obj client.Object) *owned.Summary {
	s, err := owned.SummarizeAnswer(obj)
	if err != nil {
		panic(err)
	}
	return s
}

var (
	complete       = statefulSet(3, 3, 3, 3, 2)
	rolling        = statefulSet(3, 1, 2, 2, 2)
	stale          = statefulSet(3, 3, 3, 3, 1)
	down           = statefulSet(3, 3, 0, 0, 2)
	refused        = errors.New(`StatefulSet.apps "cache" is invalid`)
	foreignService = Observation{StatefulSet: complete, NotOwned: []owned.Kind{owned.KindService}}
	foreignPDB     = Observation{StatefulSet: complete, NotOwned: []owned.Kind{owned.KindPodDisruptionBudget}}
	badSecret      = &SecretProblem{Reason: cachev1alpha1.ReasonSecretInvalid, Message: "Secret cache-tls cannot serve as memcached's certificate and key: ..."}
	noSecret       = &SecretProblem{Reason: cachev1alpha1.ReasonSecretMissing, Message: "Secret cache-tls does not exist"}
)

type conditionCase struct {
	name       string
	m          *cachev1alpha1.Memcached
	obs        Observation
	wantStatus metav1.ConditionStatus
	wantReason string
}

func runConditionCases(t *testing.T, f func(*cachev1alpha1.Memcached, Observation) metav1.Condition, wantType string, cases []conditionCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := f(tt.m, tt.obs)
			g.Expect(c.Type).To(Equal(wantType))
			g.Expect(c.Status).To(Equal(tt.wantStatus))
			g.Expect(c.Reason).To(Equal(tt.wantReason))
			g.Expect(c.Message).NotTo(BeEmpty(), "a condition always says why")
		})
	}
}

func TestAvailable(t *testing.T) {
	runConditionCases(t, available, cachev1alpha1.ConditionAvailable, []conditionCase{
		{"no StatefulSet yet", mc(3), Observation{}, metav1.ConditionFalse, cachev1alpha1.ReasonStatefulSetPending},
		{"foreign StatefulSet", mc(3), Observation{NotOwned: []owned.Kind{owned.KindStatefulSet}}, metav1.ConditionFalse, cachev1alpha1.ReasonStatefulSetNotOwned},
		{"all ready", mc(3), Observation{StatefulSet: complete}, metav1.ConditionTrue, cachev1alpha1.ReasonMinimumReplicasAvailable},
		{"rolling out with enough ready", mc(3), Observation{StatefulSet: rolling}, metav1.ConditionTrue, cachev1alpha1.ReasonMinimumReplicasAvailable},
		{"none ready", mc(3), Observation{StatefulSet: down}, metav1.ConditionFalse, cachev1alpha1.ReasonMinimumReplicasUnavailable},
		{"all but one ready: a slot restarting", mc(3), Observation{StatefulSet: statefulSet(3, 3, 2, 2, 2)}, metav1.ConditionTrue, cachev1alpha1.ReasonMinimumReplicasAvailable},
		{"one of three", mc(3), Observation{StatefulSet: statefulSet(3, 3, 1, 1, 2)}, metav1.ConditionFalse, cachev1alpha1.ReasonMinimumReplicasUnavailable},
		{"the only pod restarting", mc(1), Observation{StatefulSet: statefulSet(1, 1, 0, 0, 2)}, metav1.ConditionFalse, cachev1alpha1.ReasonMinimumReplicasUnavailable},
		{"scaled to zero", mc(0), Observation{StatefulSet: statefulSet(0, 0, 0, 0, 2)}, metav1.ConditionTrue, cachev1alpha1.ReasonScaledToZero},
		{"foreign Service: the pods still serve", mc(3), foreignService, metav1.ConditionTrue, cachev1alpha1.ReasonMinimumReplicasAvailable},
		{"no StatefulSet for want of a Secret", mc(3), Observation{Secret: noSecret}, metav1.ConditionFalse, cachev1alpha1.ReasonSecretMissing},
		{"StatefulSet held by a Secret: the pods still serve", mc(3), Observation{StatefulSet: complete, Secret: badSecret}, metav1.ConditionTrue, cachev1alpha1.ReasonMinimumReplicasAvailable},
		{"enough ready, but no membership published: the clients find no server", mc(3), Observation{StatefulSet: statefulSet(3, 3, 2, 2, 2), Unpublished: "none yet"}, metav1.ConditionFalse, cachev1alpha1.ReasonMembershipUnpublished},
	})
}

func TestProgressing(t *testing.T) {
	runConditionCases(t, progressing, cachev1alpha1.ConditionProgressing, []conditionCase{
		{"no StatefulSet yet", mc(3), Observation{}, metav1.ConditionTrue, cachev1alpha1.ReasonRollingOut},
		{"rolling out", mc(3), Observation{StatefulSet: rolling}, metav1.ConditionTrue, cachev1alpha1.ReasonRollingOut},
		{"generation not observed", mc(3), Observation{StatefulSet: stale}, metav1.ConditionTrue, cachev1alpha1.ReasonRollingOut},
		{"replicas differ from size", mc(5), Observation{StatefulSet: complete}, metav1.ConditionTrue, cachev1alpha1.ReasonRollingOut},
		{"complete", mc(3), Observation{StatefulSet: complete}, metav1.ConditionFalse, cachev1alpha1.ReasonRolloutComplete},
		{"foreign", mc(3), Observation{NotOwned: []owned.Kind{owned.KindStatefulSet}}, metav1.ConditionFalse, cachev1alpha1.ReasonStatefulSetNotOwned},
		{"refused", mc(3), Observation{Failed: []error{refused}}, metav1.ConditionFalse, cachev1alpha1.ReasonApplyFailed},
		{"foreign Service", mc(3), foreignService, metav1.ConditionFalse, cachev1alpha1.ReasonServiceNotOwned},
		{"its controller completing a rollout", mc(3), Observation{StatefulSet: completing(false)}, metav1.ConditionTrue, cachev1alpha1.ReasonRollingOut},
		// Its controller never advances currentRevision under OnDelete.
		{"rolled by the operator", mc(3), Observation{StatefulSet: completing(true)}, metav1.ConditionFalse, cachev1alpha1.ReasonRolloutComplete},
		// Updated and ready, until the kubelet stops it.
		{"memcached restarting in place", mc(3), Observation{StatefulSet: completing(true), Pods: []*owned.Pod{{RestartingFrom: "containerd://1"}}}, metav1.ConditionTrue, cachev1alpha1.ReasonRollingOut},
	})
}

// completing is a StatefulSet whose every pod is updated and available and
// whose currentRevision is still the one before: one its controller rolls
// completes then, one the operator rolls (onDelete) is complete.
func completing(onDelete bool) *owned.Summary {
	d := statefulSet(3, 3, 3, 3, 2)
	d.Status.CurrentRevision = "cache-1"
	d.OnDelete = onDelete
	return d
}

// replacing is a Memcached whose last status said its Deployment was
// being replaced.
func replacing(size int32) *cachev1alpha1.Memcached {
	m := mc(size)
	m.Status.Conditions = []metav1.Condition{{Type: cachev1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: cachev1alpha1.ReasonReplacingDeployment}}
	return m
}

// A replacement is told from its first step until every slot is ready and
// the Deployment is deleted; its pods count as serving meanwhile.
func TestReplacing(t *testing.T) {
	replaced := Observation{Replaced: oldDeployment(3), Replacing: "Deployment cache is being replaced by StatefulSet cache: 0 of 3 slots ready"}
	runConditionCases(t, progressing, cachev1alpha1.ConditionProgressing, []conditionCase{
		{"the replaced Deployment", mc(3), replaced, metav1.ConditionTrue, cachev1alpha1.ReasonReplacingDeployment},
		{"the StatefulSet not yet made", replacing(3), Observation{}, metav1.ConditionTrue, cachev1alpha1.ReasonReplacingDeployment},
		{"the StatefulSet coming up", replacing(3), Observation{StatefulSet: rolling}, metav1.ConditionTrue, cachev1alpha1.ReasonReplacingDeployment},
		{"done", replacing(3), Observation{StatefulSet: complete}, metav1.ConditionFalse, cachev1alpha1.ReasonRolloutComplete},
		{"a rollout without a replacement", mc(3), Observation{StatefulSet: rolling}, metav1.ConditionTrue, cachev1alpha1.ReasonRollingOut},
	})
	runConditionCases(t, available, cachev1alpha1.ConditionAvailable, []conditionCase{
		{"the replaced Deployment's pods serve", mc(3), replaced, metav1.ConditionTrue, cachev1alpha1.ReasonMinimumReplicasAvailable},
		{"with the slots ready so far", mc(3), Observation{StatefulSet: statefulSet(3, 3, 1, 1, 2), Replaced: oldDeployment(1), Replacing: "x"}, metav1.ConditionTrue, cachev1alpha1.ReasonMinimumReplicasAvailable},
		{"too few of either", mc(3), Observation{StatefulSet: statefulSet(3, 3, 0, 0, 2), Replaced: oldDeployment(1), Replacing: "x"}, metav1.ConditionFalse, cachev1alpha1.ReasonMinimumReplicasUnavailable},
	})
	runConditionCases(t, degraded, cachev1alpha1.ConditionDegraded, []conditionCase{
		{"a replacement is no fault", mc(3), replaced, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected},
	})
}

// Without --take-over the tutorial's Deployment is left as it is: its pods
// serve, and the conditions say what needs a person.
func TestTakeOverDisabled(t *testing.T) {
	refused := Observation{Replaced: oldDeployment(3), TakeOverDisabled: "Deployment cache was made by another operator, and taking it over needs the operator's --take-over flag"}
	runConditionCases(t, progressing, cachev1alpha1.ConditionProgressing, []conditionCase{
		{"left alone", mc(3), refused, metav1.ConditionFalse, cachev1alpha1.ReasonTakeOverDisabled},
	})
	runConditionCases(t, degraded, cachev1alpha1.ConditionDegraded, []conditionCase{
		{"left alone", mc(3), refused, metav1.ConditionTrue, cachev1alpha1.ReasonTakeOverDisabled},
		{"ranks before a Secret", mc(3), Observation{StatefulSet: complete, TakeOverDisabled: "x", Secret: noSecret}, metav1.ConditionTrue, cachev1alpha1.ReasonTakeOverDisabled},
	})
	runConditionCases(t, Stalled, cachev1alpha1.ConditionStalled, []conditionCase{
		{"left alone", mc(3), refused, metav1.ConditionTrue, cachev1alpha1.ReasonTakeOverDisabled},
	})
	runConditionCases(t, available, cachev1alpha1.ConditionAvailable, []conditionCase{
		{"its pods serve", mc(3), refused, metav1.ConditionTrue, cachev1alpha1.ReasonMinimumReplicasAvailable},
	})
}

func TestDegraded(t *testing.T) {
	runConditionCases(t, degraded, cachev1alpha1.ConditionDegraded, []conditionCase{
		{"complete", mc(3), Observation{StatefulSet: complete}, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected},
		{"rolling out", mc(3), Observation{StatefulSet: rolling}, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected},
		{"foreign", mc(3), Observation{NotOwned: []owned.Kind{owned.KindStatefulSet}}, metav1.ConditionTrue, cachev1alpha1.ReasonStatefulSetNotOwned},
		{"refused", mc(3), Observation{Failed: []error{refused}}, metav1.ConditionTrue, cachev1alpha1.ReasonApplyFailed},
		{"foreign Service", mc(3), foreignService, metav1.ConditionTrue, cachev1alpha1.ReasonServiceNotOwned},
		{"foreign PodDisruptionBudget", mc(3), foreignPDB, metav1.ConditionTrue, cachev1alpha1.ReasonPodDisruptionBudgetNotOwned},
		{"foreign StatefulSet ranks first", mc(3), Observation{NotOwned: []owned.Kind{owned.KindService, owned.KindStatefulSet}}, metav1.ConditionTrue, cachev1alpha1.ReasonStatefulSetNotOwned},
		{"a Secret", mc(3), Observation{StatefulSet: complete, Secret: badSecret}, metav1.ConditionTrue, cachev1alpha1.ReasonSecretInvalid},
		{"a Secret ranks before a refused apply", mc(3), Observation{StatefulSet: complete, Secret: noSecret, Failed: []error{refused}}, metav1.ConditionTrue, cachev1alpha1.ReasonSecretMissing},
		{"a foreign StatefulSet ranks before a Secret", mc(3), Observation{NotOwned: []owned.Kind{owned.KindStatefulSet}, Secret: noSecret}, metav1.ConditionTrue, cachev1alpha1.ReasonStatefulSetNotOwned},
	})
}

func TestEveryFailureIsNamed(t *testing.T) {
	g := NewWithT(t)
	quota := errors.New(`applying Service cache: services "cache" is forbidden: exceeded quota`)
	webhook := errors.New(`applying NetworkPolicy cache: admission webhook "policy.example.com" denied the request`)
	for _, f := range []func(*cachev1alpha1.Memcached, Observation) metav1.Condition{degraded, Stalled, progressing, reconciling} {
		c := f(mc(3), Observation{StatefulSet: complete, Failed: []error{quota, webhook}})
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonApplyFailed), c.Type)
		g.Expect(c.Message).To(Equal(`Applying Service cache: services "cache" is forbidden: exceeded quota; `+
			`applying NetworkPolicy cache: admission webhook "policy.example.com" denied the request`), c.Type)
	}
}

func TestReconciling(t *testing.T) {
	runConditionCases(t, reconciling, cachev1alpha1.ConditionReconciling, []conditionCase{
		{"no StatefulSet yet", mc(3), Observation{}, metav1.ConditionTrue, cachev1alpha1.ReasonRollingOut},
		{"rolling out", mc(3), Observation{StatefulSet: rolling}, metav1.ConditionTrue, cachev1alpha1.ReasonRollingOut},
		{"complete", mc(3), Observation{StatefulSet: complete}, metav1.ConditionFalse, cachev1alpha1.ReasonRolloutComplete},
		{"foreign", mc(3), Observation{NotOwned: []owned.Kind{owned.KindStatefulSet}}, metav1.ConditionFalse, cachev1alpha1.ReasonStatefulSetNotOwned},
		{"held by a Secret", mc(3), Observation{StatefulSet: complete, Secret: noSecret}, metav1.ConditionFalse, cachev1alpha1.ReasonSecretMissing},
	})
}

func TestStalled(t *testing.T) {
	runConditionCases(t, Stalled, cachev1alpha1.ConditionStalled, []conditionCase{
		{"complete", mc(3), Observation{StatefulSet: complete}, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected},
		{"rolling out", mc(3), Observation{StatefulSet: rolling}, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected},
		{"foreign", mc(3), Observation{NotOwned: []owned.Kind{owned.KindStatefulSet}}, metav1.ConditionTrue, cachev1alpha1.ReasonStatefulSetNotOwned},
		{"refused", mc(3), Observation{Failed: []error{refused}}, metav1.ConditionTrue, cachev1alpha1.ReasonApplyFailed},
		{"foreign PodDisruptionBudget", mc(3), foreignPDB, metav1.ConditionTrue, cachev1alpha1.ReasonPodDisruptionBudgetNotOwned},
	})
}
