package memcached

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

// stampedLog is a container's log, with the kubelet's time stamps when
// asked for them.
type stampedLog struct {
	log     string
	started time.Time
}

func (l stampedLog) Read(_ context.Context, _, _ string, opts *corev1.PodLogOptions) ([]byte, error) {
	if opts.Timestamps && l.log != "" {
		return []byte(l.started.Format(time.RFC3339Nano) + " " + l.log), nil
	}
	return []byte(l.log), nil
}

// A restart in place is confirmed only once the warm runner said what
// memcached restored, which can come after the pod's readiness: until
// then, and for at most runnerSayWait after the log began, it is looked at
// again; a log with nothing (no runner) ends it at once.
func TestARestartWaitsForTheRunnersWord(t *testing.T) {
	started := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	starting := `{"time":"2026-12-06T12:00:00Z","level":"INFO","msg":"Starting memcached","memoryFile":"/m"}` + "\n"
	for _, tc := range []struct {
		name  string
		log   string
		after time.Duration
		done  bool
	}{
		{"the runner started memcached, and has not said yet", starting, 5 * time.Second, false},
		{"it still has not said, past the wait", starting, runnerSayWait, true},
		{"no log at all: no runner", "", time.Second, true},
		{"the runner said", starting + `{"time":"2026-12-06T12:00:01Z","level":"INFO","msg":"memcached restored its cache from the memory file","items":500}` + "\n", time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			now := started.Add(tc.after)
			s := &scope{
				Reconciler: &Reconciler{Logs: stampedLog{tc.log, started}, Now: func() time.Time { return now }},
				m:          &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}},
			}
			p := &owned.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-0", Namespace: "ns"}, RestartingFrom: "old"}
			_, done, err := s.runnersWord(context.Background(), p)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(done).To(Equal(tc.done))
		})
	}
}

// A pod ready on its new memcached whose runner has not said yet what it
// restored is looked at again after settingsPoll: its readiness was its
// last event, and the runner's line comes with none.
func TestARestartNotYetToldIsLookedAtAgain(t *testing.T) {
	g := NewWithT(t)
	started := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	s := &scope{
		Reconciler: &Reconciler{Logs: stampedLog{`{"time":"2026-12-06T12:00:00Z","level":"INFO","msg":"Starting memcached"}` + "\n", started},
			Now: func() time.Time { return started.Add(time.Second) }},
		m: &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}},
	}
	want := appsv1ac.StatefulSet("c", "ns").WithSpec(appsv1ac.StatefulSetSpec().WithTemplate(corev1ac.PodTemplateSpec().
		WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName(desired.ContainerName).WithImage("memcached:next")))))
	p := &owned.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-0", Namespace: "ns"}, Ready: true, RestartingFrom: "old", MemcachedID: "new",
		Images: []owned.ContainerImage{{Name: desired.ContainerName, Image: "memcached:next"}}}
	waiting, res, err := s.confirmPod(context.Background(), p, want)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waiting).To(ContainSubstring("has not said yet"))
	g.Expect(res.RequeueAfter).To(Equal(settingsPoll))
}
