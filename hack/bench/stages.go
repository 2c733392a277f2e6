package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/hostoperator"
)

// tracker follows each Memcached of a phase through the stages of its
// convergence, as the bench's watches see them: the bench changes it
// (start), the operator's apply of its StatefulSet shows (applied), the
// StatefulSet controller reports the StatefulSet rolled out (reported), the
// operator's status says it converged (converged).
type tracker struct {
	mu        sync.Mutex
	size      int32
	start     map[string]time.Time
	applied   map[string]time.Time
	reported  map[string]time.Time
	converged map[string]time.Time
}

func newTracker() *tracker { t := &tracker{}; t.reset(0); return t }

// reset starts a phase whose Memcacheds converge at size.
func (t *tracker) reset(size int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.size = size
	t.start = map[string]time.Time{}
	t.applied = map[string]time.Time{}
	t.reported = map[string]time.Time{}
	t.converged = map[string]time.Time{}
}

func (t *tracker) started(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.start[name] = time.Now()
}

// first records now as when the Memcached name reached a stage, unless it
// did before, or the phase has not changed it yet.
func (t *tracker) first(stage map[string]time.Time, name string) {
	if _, ok := t.start[name]; !ok {
		return
	}
	if _, ok := stage[name]; !ok {
		stage[name] = time.Now()
	}
}

func (t *tracker) statefulSet(obj any) {
	d, ok := obj.(*appsv1.StatefulSet)
	if !ok || d.Spec.Replicas == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if *d.Spec.Replicas != t.size {
		return
	}
	t.first(t.applied, d.Name)
	if d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == t.size && d.Status.AvailableReplicas == t.size {
		t.first(t.reported, d.Name)
	}
}

func (t *tracker) memcached(obj any) {
	m, ok := obj.(*cachev1alpha1.Memcached)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if m.Status.ObservedGeneration == m.Generation && m.Status.ReadyReplicas == t.size &&
		meta.IsStatusConditionTrue(m.Status.Conditions, cachev1alpha1.ConditionAvailable) &&
		meta.IsStatusConditionFalse(m.Status.Conditions, cachev1alpha1.ConditionReconciling) {
		t.first(t.converged, m.Name)
	}
}

// follow adds the tracker's handlers to the informers of ca.
func (t *tracker) follow(ctx context.Context, ca cache.Cache) error {
	for obj, f := range map[client.Object]func(any){&appsv1.StatefulSet{}: t.statefulSet, &cachev1alpha1.Memcached{}: t.memcached} {
		inf, err := ca.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    f,
			UpdateFunc: func(_, o any) { f(o) },
		}); err != nil {
			return err
		}
	}
	return nil
}

// stage is the distribution of one stage's durations over a phase's
// Memcacheds.
type stage struct {
	name          string
	n             int
	p50, p95, max time.Duration
	sum           time.Duration
}

func distribution(name string, ds []time.Duration) stage {
	s := stage{name: name, n: len(ds)}
	if len(ds) == 0 {
		return s
	}
	slices.Sort(ds)
	s.p50, s.p95, s.max = ds[len(ds)/2], ds[len(ds)*95/100], ds[len(ds)-1]
	for _, d := range ds {
		s.sum += d
	}
	return s
}

// stages are the phase's stage durations: from the change to the
// operator's apply, from there to the StatefulSet controller's report, from
// there to the status; and the whole.
func (t *tracker) stages() []stage {
	t.mu.Lock()
	defer t.mu.Unlock()
	between := func(from, to map[string]time.Time) []time.Duration {
		var out []time.Duration
		for name, end := range to {
			if begin, ok := from[name]; ok {
				out = append(out, max(0, end.Sub(begin)))
			}
		}
		return out
	}
	return []stage{
		distribution("change → operator's apply seen", between(t.start, t.applied)),
		distribution("apply → StatefulSet rolled out (StatefulSet controller, kwok)", between(t.applied, t.reported)),
		distribution("rolled out → status converged (operator)", between(t.reported, t.converged)),
		distribution("change → status converged", between(t.start, t.converged)),
	}
}

// internals are the operator's own measures of a phase, from its metrics:
// how many reconciles, how long Memcacheds waited in its queue, how long
// reconciles took.
type internals struct {
	reconciles       float64
	queueWait        float64 // seconds, summed
	queued           float64
	reconcileSeconds float64
}

func scrapeInternals(p *hostoperator.Process) (internals, error) {
	var in internals
	var err error
	get := func(dst *float64, metric string, labels ...string) {
		if err != nil {
			return
		}
		*dst, err = p.MetricSum(metric, labels...)
	}
	get(&in.reconciles, "controller_runtime_reconcile_total", `controller="memcached"`)
	get(&in.queueWait, "workqueue_queue_duration_seconds_sum", `name="memcached"`)
	get(&in.queued, "workqueue_queue_duration_seconds_count", `name="memcached"`)
	get(&in.reconcileSeconds, "controller_runtime_reconcile_time_seconds_sum", `controller="memcached"`)
	return in, err
}

func (in internals) minus(before internals) internals {
	return internals{
		reconciles:       in.reconciles - before.reconciles,
		queueWait:        in.queueWait - before.queueWait,
		queued:           in.queued - before.queued,
		reconcileSeconds: in.reconcileSeconds - before.reconcileSeconds,
	}
}

// renderStages writes the stage table of the phases that changed
// Memcacheds.
func renderStages(b *strings.Builder, phases []phase) {
	var some bool
	for _, p := range phases {
		some = some || len(p.stages) > 0
	}
	if !some {
		return
	}
	b.WriteString("\nWhere a Memcached's time to converge went (the bench's watches; per Memcached: median, 95th percentile, slowest, and the sum over all):\n\n")
	b.WriteString("| phase | stage | Memcacheds | p50 | p95 | max | sum |\n|---|---|---|---|---|---|---|\n")
	for _, p := range phases {
		for _, s := range p.stages {
			fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s |\n", p.name, s.name, s.n,
				s.p50.Round(time.Millisecond), s.p95.Round(time.Millisecond), s.max.Round(time.Millisecond), s.sum.Round(time.Second))
		}
	}
	b.WriteString("\nThe operator's own measures (its metrics): reconciles, time Memcacheds waited in its queue, time in reconciles:\n\n")
	b.WriteString("| phase | reconciles | queue wait, mean | queue wait, sum | reconcile, mean | reconcile, sum |\n|---|---|---|---|---|---|\n")
	for _, p := range phases {
		in := p.internals
		if in.reconciles == 0 {
			continue
		}
		mean := func(sum, n float64) string {
			if n == 0 {
				return "-"
			}
			return (time.Duration(sum / n * float64(time.Second))).Round(100 * time.Microsecond).String()
		}
		fmt.Fprintf(b, "| %s | %.0f | %s | %.1f s | %s | %.1f s |\n", p.name, in.reconciles,
			mean(in.queueWait, in.queued), in.queueWait, mean(in.reconcileSeconds, in.reconciles), in.reconcileSeconds)
	}
}
