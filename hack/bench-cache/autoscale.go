package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	ketama "github.com/example/memcached-operator/pkg/ring"
)

// The autoscaling run (-autoscale): three Memcacheds of 16 MiB slots under
// the same load at once, each with a client of its own following its
// discovery endpoint, whose working set grows from what one slot holds to
// three times that and back: one with spec.autoscaling, one sized right
// for the peak from the start (3 slots), one scaled as an HPA on CPU at
// 80% scales it (hpa.go).
const (
	slotMiB = 16
	// oneSlotKeys of 1 KiB fit in one slot with room (the working set of
	// the first and last phases); threeSlotKeys need three.
	oneSlotKeys   = 10000
	threeSlotKeys = 30000
	bucket        = 10 * time.Second
)

// phase is a part of the run with a working set of keys keys.
type phase struct {
	name string
	keys int
	for_ time.Duration
}

func phases(short bool) []phase {
	if short {
		return []phase{{"one slot's worth", oneSlotKeys, time.Minute}, {"three slots' worth", threeSlotKeys, 3 * time.Minute}, {"one slot's worth again", oneSlotKeys, 5 * time.Minute}}
	}
	return []phase{{"one slot's worth", oneSlotKeys, 2 * time.Minute}, {"three slots' worth", threeSlotKeys, 5 * time.Minute}, {"one slot's worth again", oneSlotKeys, 9 * time.Minute}}
}

// scaled is one of the three Memcacheds, and what its client saw.
type scaled struct {
	name  string
	label string
	spec  cachev1alpha1.MemcachedSpec
	r     *ring
	load  *zipfLoad
	held  *heldKeys
	// series are its buckets: hit ratio and size over time.
	mu     sync.Mutex
	series []point
	steps  []string
	// said is each change of its status.autoscaling seen at the
	// buckets' ends.
	said []statusSaid
}

// statusSaid is what a status.autoscaling said from a moment of the run.
type statusSaid struct {
	at   time.Duration
	what string
}

// point is a bucket's hits and gets, the size then, and how many of the
// held keys read back at its end (-1: the reading failed).
type point struct {
	at         time.Duration
	gets, hits int
	size       int32
	held       int
}

func autoscaledSpecs() []*scaled {
	base := func(size int32) cachev1alpha1.MemcachedSpec {
		return cachev1alpha1.MemcachedSpec{
			Size: ptr.To(size), Image: repo.Version("LOCAL_MEMCACHED_IMAGE"), MemoryLimitMiB: ptr.To[int32](slotMiB),
			ContainerPort: ptr.To[int32](11211),
			KeyMoves:      &cachev1alpha1.KeyMovesSpec{Ring: string(ketama.Libmemcached), ClientPollSeconds: ptr.To[int32](2)},
		}
	}
	auto := base(1)
	auto.Autoscaling = &cachev1alpha1.AutoscalingSpec{MinSize: 1, MaxSize: 4, ScaleUpSeconds: ptr.To[int32](30), ScaleDownSeconds: ptr.To[int32](120)}
	hpa := base(1)
	hpa.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(hpaCPURequest)}}
	return []*scaled{
		{name: "autoscaled", label: "spec.autoscaling (1 to 4 slots)", spec: auto},
		{name: "right-sized", label: "3 slots from the start", spec: base(3)},
		{name: "cpu-hpa", label: "an HPA on CPU at 80% (request " + hpaCPURequest + ")", spec: hpa},
	}
}

// autoscaling runs the three Memcacheds through the phases and returns the
// report's part.
func (e *env) autoscaling(ctx context.Context) (string, error) {
	// The clients' discovery ends with the load, before the cluster goes.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	all := autoscaledSpecs()
	for _, s := range all {
		m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: s.name}, Spec: s.spec}
		if err := e.c.Create(ctx, m); err != nil {
			return "", err
		}
	}
	for _, s := range all {
		s.r = &ring{}
		if err := converged(ctx, e.c, client.ObjectKey{Namespace: namespace, Name: s.name}, *s.spec.Size, nil); err != nil {
			return "", fmt.Errorf("%s: %w", s.name, err)
		}
		if err := discover(ctx, e.c, client.ObjectKey{Namespace: namespace, Name: s.name}, e.dns, access{}, s.r); err != nil {
			return "", err
		}
		s.load = newZipfLoad(newClient(s.r, access{}, 4), oneSlotKeys)
		s.held = &heldKeys{c: s.load.c}
		if err := s.held.write(ctx); err != nil {
			return "", fmt.Errorf("%s: %w", s.name, err)
		}
	}
	ps := phases(e.cfg.short)
	start := time.Now()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(func() { s.load.run(ctx) })
		wg.Go(func() { s.held.run(ctx) })
		wg.Go(func() { s.record(ctx, e.c, start) })
	}
	hpa := &cpuHPA{c: e.c, key: client.ObjectKey{Namespace: namespace, Name: "cpu-hpa"}}
	wg.Go(func() { hpa.run(ctx) })
	for _, p := range ps {
		fmt.Fprintf(os.Stderr, "== %s: a working set of %d keys for %s\n", p.name, p.keys, p.for_)
		for _, s := range all {
			s.load.setKeys(p.keys)
		}
		sleep(ctx, p.for_)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	cancel()
	wg.Wait()
	for _, s := range all {
		s.steps = scaledEvents(context.Background(), e.c, s.name)
	}
	return renderAutoscaling(all, ps, hpa), writePlot(all, ps)
}

// record adds a point every bucket: the load's gets and hits since the
// last, and the Memcached's spec.size.
func (s *scaled) record(ctx context.Context, c client.Client, start time.Time) {
	every(ctx, bucket, func() {
		gets, hits := s.load.take()
		m := &cachev1alpha1.Memcached{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: s.name}, m); err != nil {
			return
		}
		size := ptr.Deref(m.Spec.Size, 1)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.series = append(s.series, point{at: time.Since(start), gets: gets, hits: hits, size: size, held: int(s.held.present.Load())})
		if a := m.Status.Autoscaling; a != nil {
			said := fmt.Sprintf("next `%s`: %s", a.Next, a.Reason)
			if n := len(s.said); n == 0 || s.said[n-1].what != said {
				s.said = append(s.said, statusSaid{time.Since(start), said})
			}
		}
	})
}
