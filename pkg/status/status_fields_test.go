package status

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/owned"
)

func TestStatusTellsWhereToConnect(t *testing.T) {
	g := NewWithT(t)
	st := Status(mc(3), Observation{StatefulSet: complete}, metav1.Now())
	g.Expect(st.Service).To(BeNil(), "no Service observed: nothing to tell")

	svc := summary(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "memcached", Port: 11311}}},
	})
	st = Status(mc(3), Observation{StatefulSet: complete, Service: svc}, metav1.Now())
	g.Expect(st.Service).NotTo(BeNil())
	g.Expect(*st.Service.Name).To(Equal("cache"))
	g.Expect(*st.Service.Port).To(Equal(int32(11311)))
	g.Expect(*st.Service.Address).To(Equal("cache.ns.svc:11311"))
}

func TestStatusKeepsTransitionTimes(t *testing.T) {
	g := NewWithT(t)
	earlier := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	now := metav1.NewTime(time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC))
	m := mc(3)
	m.Status.Conditions = []metav1.Condition{
		{Type: cachev1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, LastTransitionTime: earlier},
		{Type: cachev1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, LastTransitionTime: earlier},
	}
	st := Status(m, Observation{StatefulSet: complete}, now)

	times := map[string]metav1.Time{}
	for _, c := range st.Conditions {
		times[*c.Type] = *c.LastTransitionTime
		g.Expect(*c.ObservedGeneration).To(Equal(int64(4)))
	}
	g.Expect(times[cachev1alpha1.ConditionAvailable]).To(Equal(earlier), "status unchanged: time kept")
	g.Expect(times[cachev1alpha1.ConditionProgressing]).To(Equal(now), "status changed: time moves")
	g.Expect(times[cachev1alpha1.ConditionDegraded]).To(Equal(now), "new condition: time is now")
	g.Expect(*st.ObservedGeneration).To(Equal(int64(4)))
	g.Expect(*st.Replicas).To(Equal(int32(3)))
	g.Expect(*st.ReadyReplicas).To(Equal(int32(3)))
	g.Expect(*st.Selector).To(Equal("cache.example.com/memcached=cache"), "the project's own label: the scale subresource's selector")
}

func TestStatusLeavesOutZeroCounts(t *testing.T) {
	g := NewWithT(t)
	st := Status(mc(0), Observation{StatefulSet: statefulSet(0, 0, 0, 0, 2)}, metav1.Now())
	g.Expect(st.Replicas).To(BeNil())
	g.Expect(st.ReadyReplicas).To(BeNil())
	st = Status(mc(3), Observation{}, metav1.Now())
	g.Expect(st.Replicas).To(BeNil())
}

// TestKstatusReadsTheStatus checks the status the way Flux and other kstatus
// readers judge health.
func TestKstatusReadsTheStatus(t *testing.T) {
	tests := []struct {
		name       string
		obs        Observation
		generation int64 // the Memcached's generation when read; 4 is the one the status was computed for
		want       kstatus.Status
	}{
		{"converged", Observation{StatefulSet: complete}, 4, kstatus.CurrentStatus},
		{"rolling out", Observation{StatefulSet: rolling}, 4, kstatus.InProgressStatus},
		{"no StatefulSet yet", Observation{}, 4, kstatus.InProgressStatus},
		{"spec changed since", Observation{StatefulSet: complete}, 5, kstatus.InProgressStatus},
		{"pods cannot be created", Observation{StatefulSet: statefulSet(3, 0, 0, 0, 2), CreateFailed: "exceeded quota"}, 4, kstatus.FailedStatus},
		{"foreign StatefulSet", Observation{NotOwned: []owned.Kind{owned.KindStatefulSet}}, 4, kstatus.FailedStatus},
		{"refused StatefulSet", Observation{Failed: []error{refused}}, 4, kstatus.FailedStatus},
		{"foreign Service", foreignService, 4, kstatus.FailedStatus},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m := mc(3)
			raw, err := json.Marshal(Status(m, tt.obs, metav1.Now()))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(json.Unmarshal(raw, &m.Status)).To(Succeed())
			m.Generation = tt.generation
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
			g.Expect(err).NotTo(HaveOccurred())
			res, err := kstatus.Compute(&unstructured.Unstructured{Object: u})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Status).To(Equal(tt.want), res.Message)
		})
	}
}

// The monitored condition is there only while monitoring is on, and says
// whether a ServiceMonitor scrapes the exporter; it never touches the
// cache's own conditions.
func TestMonitored(t *testing.T) {
	tests := []struct {
		monitor Monitor
		want    *metav1.Condition
	}{
		{MonitorOff, nil},
		{MonitorReady, &metav1.Condition{Status: metav1.ConditionTrue, Reason: cachev1alpha1.ReasonServiceMonitorReady}},
		{MonitorCRDMissing, &metav1.Condition{Status: metav1.ConditionFalse, Reason: cachev1alpha1.ReasonServiceMonitorCRDMissing}},
		{MonitorNotOwned, &metav1.Condition{Status: metav1.ConditionFalse, Reason: cachev1alpha1.ReasonServiceMonitorNotOwned}},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		cs := conditions(mc(3), Observation{StatefulSet: complete, Monitor: tt.monitor})
		var got *metav1.Condition
		for i := range cs {
			if cs[i].Type == cachev1alpha1.ConditionMonitored {
				got = &cs[i]
			}
			if cs[i].Type == cachev1alpha1.ConditionAvailable {
				g.Expect(cs[i].Status).To(Equal(metav1.ConditionTrue), "monitoring does not decide availability")
			}
		}
		if tt.want == nil {
			g.Expect(got).To(BeNil())
			continue
		}
		g.Expect(got).NotTo(BeNil())
		g.Expect(got.Status).To(Equal(tt.want.Status))
		g.Expect(got.Reason).To(Equal(tt.want.Reason))
		g.Expect(got.Message).NotTo(BeEmpty())
	}
}

// The image in the status is the one the operator gives the pods, so that
// `kubectl get memcached -o wide` shows it when spec.image is unset.
func TestStatusShowsTheImage(t *testing.T) {
	st := Status(mc(1), Observation{StatefulSet: complete, Image: "memcached:default"}, metav1.Now())
	NewWithT(t).Expect(*st.Image).To(Equal("memcached:default"))
}

// A restart for Secret content a pod could not load in place is told as
// such while it rolls, though the pod that said so is the first replaced.
func TestARestartForAFailedReloadIsNamed(t *testing.T) {
	runConditionCases(t, progressing, cachev1alpha1.ConditionProgressing, []conditionCase{
		{"restarting", mc(3), Observation{StatefulSet: rolling, RestartingForReload: true}, metav1.ConditionTrue, cachev1alpha1.ReasonReloadFailed},
		{"restarted", mc(3), Observation{StatefulSet: complete, RestartingForReload: true}, metav1.ConditionFalse, cachev1alpha1.ReasonRolloutComplete},
		{"another rollout", mc(3), Observation{StatefulSet: rolling}, metav1.ConditionTrue, cachev1alpha1.ReasonRollingOut},
	})
}
