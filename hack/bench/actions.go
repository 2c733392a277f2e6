package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// promisesKept checks the promises no run may break, whatever the
// machine's speed: no conflict in any phase, no request at rest. It first
// checks that the audit log saw the operator at all: creating N Memcacheds
// costs at least one write each (their StatefulSets), and a log that
// recorded fewer would make every other check pass with nothing to check.
func (r *run) promisesKept() error {
	return promisesKept(r.n, r.phases)
}

func promisesKept(n int, phases []phase) error {
	var broken []string
	for _, p := range phases {
		if p.name == "create" && p.writes < n {
			broken = append(broken, fmt.Sprintf("create: the audit log recorded %d writes of the operator for %d Memcacheds; it does not see the operator, so nothing below is checked", p.writes, n))
		}
		if p.conflict > 0 {
			broken = append(broken, fmt.Sprintf("%s: %d conflicts (409)", p.name, p.conflict))
		}
		if strings.HasPrefix(p.name, steadyPhase) && p.total() > 0 {
			broken = append(broken, fmt.Sprintf("%s: %d requests while nothing changed", p.name, p.total()))
		}
	}
	if len(broken) > 0 {
		return errors.New("promise broken: " + strings.Join(broken, "; "))
	}
	return nil
}

func (r *run) progress(done int) {
	fmt.Fprintf(os.Stderr, "   %d of %d converged, operator RSS %d MiB (peak %d MiB), CPU %.0f s\n",
		done, r.n, r.op.rss()/1024, r.op.peakRSS()/1024, r.op.cpuSeconds())
}

func (r *run) create(ctx context.Context) error {
	r.track.reset(1)
	if err := parallel(r.names, func(name string) error {
		r.track.started(name)
		spec := cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}
		if r.cfg.monitoring {
			spec.Monitoring = &cachev1alpha1.MonitoringSpec{Enabled: true}
		}
		return r.c.Create(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: name}, Spec: spec})
	}); err != nil {
		return err
	}
	return waitConverged(ctx, r.watch, r.n, 1, r.convergeTimeout(), r.progress)
}

// idle is the steady phase: nothing changes, the operator resyncs.
func (r *run) idle(context.Context) error {
	time.Sleep(r.cfg.steady)
	return nil
}

func (r *run) scale(ctx context.Context) error {
	r.track.reset(2)
	if err := parallel(r.names, func(name string) error {
		r.track.started(name)
		m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: name}}
		return r.c.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":2}}`)))
	}); err != nil {
		return err
	}
	return waitConverged(ctx, r.watch, r.n, 2, r.convergeTimeout(), r.progress)
}

func (r *run) delete(ctx context.Context) error {
	// One by one, as the creates: a single delete-collection of thousands
	// outlasts the apiserver's request timeout on this machine.
	if err := parallel(r.names, func(name string) error {
		return client.IgnoreNotFound(r.c.Delete(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: name}}))
	}); err != nil {
		return err
	}
	return waitGone(ctx, r.watch)
}

// convergeTimeout bounds a phase's wait: on 2 cores, 300 ms per Memcached,
// at least 10 minutes, unless -timeout says otherwise.
func (r *run) convergeTimeout() time.Duration {
	if r.cfg.timeout > 0 {
		return r.cfg.timeout
	}
	return max(10*time.Minute, time.Duration(r.n)*300*time.Millisecond)
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	return out
}
