package memcached

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/autoscale"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

// AutoscalerFieldManager is the field manager under which the operator
// sets spec.size for spec.autoscaling.
const AutoscalerFieldManager = "memcached-operator-autoscaler"

// Autoscaler reads the signals of the pods of every Memcached with
// spec.autoscaling each Interval, straight from the pods (no request to
// the apiserver), and takes the steps autoscale.Decide says through the
// Memcached's scale subresource, as an HPA would: the reconcile then
// moves the keys. It takes no step while the last one is under way (the
// status's Progressing, or pods not ready), and forgets the readings of a
// size once the size changes.
type Autoscaler struct {
	// Client reads the Memcacheds from the manager's cache and writes
	// their scale.
	Client client.Client
	// APIReader reads a Memcached's managed fields when another manager
	// owns spec.size.
	APIReader client.Reader
	// Pods are m's pods as the store of owned objects holds them.
	Pods func(m *cachev1alpha1.Memcached) ([]*owned.Pod, error)
	// Read reads a pod's signals, with its working set over seconds.
	Read func(ctx context.Context, ip string, seconds int64) (autoscale.Signals, error)
	// Recorder records a Scaled event per step.
	Recorder events.EventRecorder
	// Interval is how often the pods are read.
	Interval time.Duration
	// Enqueue reconciles a Memcached whose status is to say a new decision.
	Enqueue func(types.NamespacedName)
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu    sync.Mutex
	state map[types.NamespacedName]*autoscaled
}

// autoscaled is what the Autoscaler keeps of one Memcached: its poll
// alone reads and writes size and history; shown and the last step are
// read by the reconciles too, under the Autoscaler's mu.
type autoscaled struct {
	size    int32
	history autoscale.History
	// shown is the decision the status tells, which changes when the step
	// does: readings alone do not rewrite the status.
	shown         autoscale.Decision
	lastScale     string
	lastScaleTime time.Time
}

// Start reads the signals every Interval until ctx ends.
func (a *Autoscaler) Start(ctx context.Context) error {
	t := time.NewTicker(a.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			a.Poll(ctx)
		}
	}
}

// NeedLeaderElection: only the leader steps.
func (a *Autoscaler) NeedLeaderElection() bool { return true }

// Poll reads every autoscaled Memcached's pods once, and steps where due.
func (a *Autoscaler) Poll(ctx context.Context) {
	var list cachev1alpha1.MemcachedList
	// Read only: no copy of every Memcached of the cache each poll.
	if err := a.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Cannot list the Memcacheds to autoscale")
		return
	}
	seen := map[types.NamespacedName]bool{}
	for i := range list.Items {
		m := &list.Items[i]
		if !desired.Autoscales(m) || m.DeletionTimestamp != nil {
			continue
		}
		key := client.ObjectKeyFromObject(m)
		seen[key] = true
		a.poll(ctx, m, a.stateOf(key))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for key := range a.state {
		if !seen[key] {
			delete(a.state, key)
			forgetAutoscaling(key)
		}
	}
}

func (a *Autoscaler) stateOf(key types.NamespacedName) *autoscaled {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state == nil {
		a.state = map[types.NamespacedName]*autoscaled{}
	}
	st, ok := a.state[key]
	if !ok {
		st = &autoscaled{}
		a.state[key] = st
	}
	return st
}

// poll reads m's pods, decides, and steps.
func (a *Autoscaler) poll(ctx context.Context, m *cachev1alpha1.Memcached, st *autoscaled) {
	p := autoscale.PolicyOf(m.Spec.Autoscaling)
	now := a.now()
	size := desired.Replicas(m)
	if size != st.size {
		st.size, st.history = size, autoscale.History{}
	}
	var d autoscale.Decision
	if why := unsettled(m, size); why != "" {
		st.history.Forget(now)
		d = autoscale.Decision{Next: autoscale.Hold, Reason: why, To: size, Cause: "size not reached"}
	} else if failed := a.read(ctx, m, p, st, now); failed != "" {
		d = autoscale.Decision{Next: autoscale.Hold, Reason: failed, To: size, Cause: "signals not read"}
	} else {
		d = autoscale.Decide(p, size, st.history.Samples, now)
		st.history.Forget(now.Add(-max(p.Up, p.Down)))
	}
	recordAutoscaling(m, st.history.Samples, d)
	if d.Step(size) {
		d = a.step(ctx, m, st, d, now)
	}
	a.mu.Lock()
	changed := d.Next != st.shown.Next || d.Cause != st.shown.Cause
	if changed {
		st.shown = d
	}
	a.mu.Unlock()
	if changed {
		a.Enqueue(client.ObjectKeyFromObject(m))
	}
}

// unsettled says why m's size is not reached yet (empty: it is): a new
// generation the status does not tell of yet, a rollout or a move under
// way, pods not ready.
func unsettled(m *cachev1alpha1.Memcached, size int32) string {
	progressing := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionProgressing)
	switch {
	case m.Status.ObservedGeneration != m.Generation:
		return "waiting for the operator to reconcile the last change"
	case progressing != nil && progressing.Status == metav1.ConditionTrue:
		return "waiting for the change under way to end: " + progressing.Message
	case m.Status.ReadyReplicas != size:
		return fmt.Sprintf("waiting for the %d slots to be ready (%d are)", size, m.Status.ReadyReplicas)
	}
	return ""
}
