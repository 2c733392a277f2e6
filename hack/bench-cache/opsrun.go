package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testcerts"
)

// opsRun is the Memcached the operations are done to, and the client that
// reads it through them.
type opsRun struct {
	e   *env
	ctx context.Context
	key client.ObjectKey
	mc  *cachev1alpha1.Memcached
	r   *ring
	a   access
	c   *memcache.Client
	ca  *testcerts.CA
	// renewed is the DER of the certificate a rotation serves; evicted
	// the pods an operation evicted or deleted.
	renewed []byte
	evicted []*corev1.Pod
}

// startOps creates the Memcached opsName, with TLS, authentication and
// key moves, and a client that follows its membership; stop ends both.
func (e *env) startOps(ctx context.Context) (o *opsRun, stop func(), err error) {
	ca, pair, err := testcerts.ForService(namespace, opsName)
	if err != nil {
		return nil, nil, err
	}
	if err := e.c.Create(ctx, ca.Secret(namespace, "ops-tls", pair)); err != nil {
		return nil, nil, err
	}
	auth := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "ops-auth"},
		StringData: map[string]string{"authfile": "bench:first-password\n"}}
	if err := e.c.Create(ctx, auth); err != nil {
		return nil, nil, err
	}
	o = &opsRun{e: e, ctx: ctx, ca: ca, key: client.ObjectKey{Namespace: namespace, Name: opsName}}
	o.mc = &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: opsName}, Spec: cachev1alpha1.MemcachedSpec{
		Size: ptr.To[int32](3),
		TLS:  &cachev1alpha1.TLSSpec{SecretName: "ops-tls"},
		Auth: &cachev1alpha1.AuthSpec{SecretName: "ops-auth"},
		// The client's ring, and its poll (discoverEvery) with a second
		// of slack.
		KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: "libmemcached", ClientPollSeconds: ptr.To[int32](2)},
		// Room for the keys in two slots at every limit the operations
		// set (96 MiB holds about 17,500 items of 1 KiB), as a hand-off
		// asks: a smaller cache would lose to memory what no move can keep.
		MemoryLimitMiB: ptr.To[int32](opsMemoryMiB),
	}}
	if e.cfg.keysPerSecond > 0 {
		o.mc.Spec.KeyMoves.KeysPerSecond = ptr.To(int32(e.cfg.keysPerSecond))
	}
	if err := e.c.Create(ctx, o.mc); err != nil {
		return nil, nil, err
	}
	if o.r, err = newRing(); err != nil {
		return nil, nil, err
	}
	o.a = access{user: "bench", pass: "first-password",
		tls: &tls.Config{RootCAs: ca.Pool(), ServerName: testcerts.ServiceHosts(namespace, opsName)[0], MinVersion: tls.VersionTLS12}}
	dctx, stopDiscovering := context.WithCancel(ctx)
	if err := discover(dctx, e.c, o.key, e.dns, o.a, o.r); err != nil {
		stopDiscovering()
		return nil, nil, err
	}
	if err := converged(ctx, e.c, o.key, 3, o.r); err != nil {
		stopDiscovering()
		return nil, nil, err
	}
	o.c = newClient(o.r, o.a, e.cfg.load.concurrency)
	return o, func() { o.c.Close(); stopDiscovering() }, nil
}

func (o *opsRun) patch(obj client.Object, p string) error {
	return o.e.c.Patch(o.ctx, obj, client.RawPatch(types.MergePatchType, []byte(p)))
}

func (o *opsRun) memcached() client.Object {
	return &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: opsName}}
}

// served waits until every pod of the ring serves what ok accepts on a
// new connection: new Secret content is loaded in place, so no
// StatefulSet change tells when it is.
func (o *opsRun) served(ok func(addr string) bool) func() error {
	return func() error {
		return wait.PollUntilContextTimeout(o.ctx, 250*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
			for _, addr := range o.r.list() {
				if !ok(addr) {
					return false, nil
				}
			}
			return true, nil
		})
	}
}

// run stores the keys of round, does s while reading them, and counts
// what the client kept through it.
func (o *opsRun) run(round int, s opStep) (operation, error) {
	ctx, e := o.ctx, o.e
	op := operation{name: s.name, keys: e.cfg.opKeys, moves: strings.HasPrefix(s.name, "scale ") || strings.Contains(s.name, "keys handed off"), empties: s.empties}
	load := e.cfg.load
	load.keys = e.cfg.opKeys
	if err := store(ctx, o.c, load, round); err != nil {
		return op, fmt.Errorf("%s: %w", s.name, err)
	}
	before, err := podsOf(ctx, e.c, o.mc)
	if err != nil {
		return op, err
	}
	op.pods = len(before)
	slotsBefore := o.r.names(e.cfg.opKeys)
	rest := startReading(ctx, o.r, o.a, e.cfg.opKeys)
	time.Sleep(restWindow(e.cfg.short))
	rest.stop()
	op.p99Rest = rest.p99()
	reading := startReading(ctx, o.r, o.a, e.cfg.opKeys)
	start := time.Now()
	evictions := watchEvictions(ctx, o.r, o.a, start)
	err = o.do(s)
	op.took = time.Since(start)
	reading.stop()
	op.evicted = evictions.total()
	if err != nil {
		return op, fmt.Errorf("%s: %w", s.name, err)
	}
	if err := o.count(&op, reading, before, slotsBefore, start); err != nil {
		return op, err
	}
	if op.kept, op.stale, err = kept(ctx, o.c, e.cfg.opKeys, round); err != nil {
		return op, fmt.Errorf("%s: reading the keys: %w", s.name, err)
	}
	return op, nil
}

// restWindow is how long the reads run at rest before each operation,
// their p99 the one the operation's is held to.
func restWindow(short bool) time.Duration {
	if short {
		return time.Second
	}
	return 5 * time.Second
}

// do does s, and waits until it is done and the client follows the pods
// that serve after it.
func (o *opsRun) do(s opStep) error {
	d := &appsv1.StatefulSet{}
	if err := o.e.c.Get(o.ctx, o.key, d); err != nil {
		return err
	}
	generation := d.Generation
	if err := s.do(); err != nil {
		return err
	}
	var err error
	switch {
	case s.rolls:
		err = wait.PollUntilContextTimeout(o.ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			err := o.e.c.Get(ctx, o.key, d)
			return err == nil && d.Generation > generation, nil
		})
	case s.settled != nil:
		err = s.settled()
	default:
		// Whatever the new process would change, it changes within its
		// first reconcile: a few seconds after it is ready.
		time.Sleep(10 * time.Second)
	}
	if err != nil {
		return err
	}
	return converged(o.ctx, o.e.c, o.key, s.size, o.r)
}

// count fills op with what the pods and the reads went through during
// the operation that started at start, the pods having been before.
func (o *opsRun) count(op *operation, reading *reader, before []corev1.Pod, slotsBefore []string, start time.Time) error {
	after, err := podsOf(o.ctx, o.e.c, o.mc)
	if err != nil {
		return err
	}
	op.replaced, op.podsAfter = replaced(before, after), len(after)
	stayed := stayedSlots(o.mc, before, after)
	restartedSlots := restartedSlots(o.mc, before, after)
	untouched := map[string]bool{}
	for name := range stayed {
		untouched[name] = !restartedSlots[name]
	}
	op.restarted = len(restartedSlots)
	op.reads, op.misses, op.firstError, op.p99 = reading.reads.Load(), reading.misses.Load(), reading.first(), reading.p99()
	if op.moves {
		if op.movedKeys, err = allEvents(o.ctx, o.e.c, o.mc, "KeysMoved", start); err != nil {
			return err
		}
	}
	// A slot whose pod went without handing its keys off: the operator
	// says so (its KeysLost event).
	if op.keysLost, err = lastEvent(o.ctx, o.e.c, o.mc, "KeysLost", start); err != nil {
		return err
	}
	op.errors, op.errorsStayed, op.errorsFor = reading.errorsOn(untouched)
	_, op.errorsRestarted, _ = reading.errorsOn(restartedSlots)
	for i, name := range o.r.names(o.e.cfg.opKeys) {
		if name == slotsBefore[i] && stayed[name] {
			op.inPlace++
		}
	}
	return nil
}
