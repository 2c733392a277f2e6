package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

const (
	// hpaCPURequest is the CPU request of the HPA run's memcached
	// containers: an HPA on CPU needs one.
	hpaCPURequest = "100m"
	// What the C5C3 operator's HPA sets: 80% of the request, a scale-down
	// window of 300 s; the HPA controller's own period, tolerance and
	// scale-up policy (double, or 4 pods more, each 15 s).
	hpaTarget     = 0.8
	hpaDownWindow = 300 * time.Second
	hpaPeriod     = 15 * time.Second
	hpaTolerance  = 0.1
	hpaMax        = 4
)

// cpuHPA scales the Memcached key as the HorizontalPodAutoscaler
// controller (autoscaling/v2, its default behavior) scales on CPU
// utilization: the pods' CPU read from their cgroups on this machine (the
// real node) where metrics-server would read the kubelet's, the desired
// count ceil(pods x utilization / target) outside the tolerance, at once
// up, down only to the highest recommendation of the last window; through
// the scale subresource, as the HPA writes it.
type cpuHPA struct {
	c   client.Client
	key client.ObjectKey

	last            map[types.UID]uint64
	recommendations []recommendation
	peak, sum       float64
	readings, steps int
}

type recommendation struct {
	at   time.Time
	size int32
}

func (h *cpuHPA) run(ctx context.Context) {
	h.last = map[types.UID]uint64{}
	every(ctx, hpaPeriod, func() {
		if err := h.tick(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "   cpu-hpa:", err)
		}
	})
}

// tick reads the utilization and scales if the HPA would.
func (h *cpuHPA) tick(ctx context.Context) error {
	m := &cachev1alpha1.Memcached{}
	if err := h.c.Get(ctx, h.key, m); err != nil {
		return err
	}
	util, ok, err := h.utilization(ctx, m)
	if err != nil || !ok {
		return err
	}
	h.readings++
	h.sum += util
	h.peak = max(h.peak, util)
	current := ptr.Deref(m.Spec.Size, 1)
	want := current
	if math.Abs(util/hpaTarget-1) > hpaTolerance {
		want = int32(math.Ceil(float64(current) * util / hpaTarget))
	}
	want = min(max(want, 1), hpaMax, max(2*current, current+4))
	now := time.Now()
	h.recommendations = append(h.recommendations, recommendation{now, want})
	for _, r := range h.recommendations {
		if now.Sub(r.at) <= hpaDownWindow && want < current {
			want = max(want, min(r.size, current))
		}
	}
	if want == current {
		return nil
	}
	h.steps++
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: want}}
	return h.c.SubResource("scale").Update(ctx, m, client.WithSubResourceBody(scale), client.FieldOwner("horizontal-pod-autoscaler"))
}

// utilization is the pods' CPU over the last period against their
// requests, summed over the ready pods as the HPA sums them; false until
// every pod has been read twice.
func (h *cpuHPA) utilization(ctx context.Context, m *cachev1alpha1.Memcached) (float64, bool, error) {
	pods, err := podsOf(ctx, h.c, m)
	if err != nil {
		return 0, false, err
	}
	var used, requested float64
	complete := len(pods) > 0
	for _, p := range pods {
		usage, err := podCPU(p.UID)
		if err != nil {
			return 0, false, err
		}
		before, seen := h.last[p.UID]
		h.last[p.UID] = usage
		if !seen || p.DeletionTimestamp != nil {
			complete = false
			continue
		}
		used += float64(usage-before) / float64(hpaPeriod)
		requested += podRequest(p)
	}
	if !complete || requested == 0 {
		return 0, false, nil
	}
	return used / requested, true, nil
}

// podRequest is the pod's CPU request, in cores.
func podRequest(p corev1.Pod) float64 {
	var sum float64
	for _, c := range p.Spec.Containers {
		sum += c.Resources.Requests.Cpu().AsApproximateFloat64()
	}
	return sum
}

// podCPU is the CPU time the pod uid used, in nanoseconds, from its
// cpuacct cgroup (v1) on this machine.
func podCPU(uid types.UID) (uint64, error) {
	dir, err := podCgroup("cpuacct", uid)
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}
