package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/internal/testsupport/testcerts"
)

// operation is what a client kept through one thing the operator does to
// the pods.
type operation struct {
	name string
	// took is from the change to the last old pod gone and the client
	// following the new ones.
	took time.Duration
	// kept of keys answered a get after the operation with the value
	// stored before it; stale ones with a value stored before an earlier
	// operation (a key that had moved to another pod and is read from
	// its old one again).
	kept, stale, keys int
	// inPlace of keys are those whose slot is the same before and after
	// the operation, with the same pod: the keys an operation must keep.
	inPlace int
	// reads, misses and errors of the client's gets during the operation;
	// errorsStayed of errors are those of slots whose pod stayed as it
	// was (memcached not restarted), errorsRestarted those of slots whose
	// memcached restarted in place, and errorsFor the time from the first
	// error to the last.
	reads, misses, errors int64
	errorsStayed          int64
	errorsRestarted       int64
	errorsFor             time.Duration
	// p99 of the gets answered during the operation.
	p99 time.Duration
	// movedKeys is what the operator said of the keys it moved (its
	// KeysMoved event), when it moved some.
	movedKeys      string
	firstError     string
	replaced, pods int // pods replaced, of pods before
	restarted      int // pods whose memcached restarted in place
	podsAfter      int
	// moves: the operation changes the slots, and the operator moves the
	// keys (spec.keyMoves).
	moves bool
	// empties: memcached keeps no item across the operation (a new memory
	// limit), and the operator says so: the keys it loses are no miss.
	empties bool
}

// opsName is the Memcached the operations are done to: size 3, TLS and
// authentication, keys moved on a scale (spec.keyMoves), so that every
// operation can be tried on it.
const opsName = "ops"

// operations stores opKeys keys in a Memcached of size 3 with TLS and
// authentication before each operation, reads them while the operation
// runs and every one of them after it.
func (e *env) operations(ctx context.Context) ([]operation, error) {
	ca, pair, err := testcerts.ForService(namespace, opsName)
	if err != nil {
		return nil, err
	}
	if err := e.c.Create(ctx, ca.Secret(namespace, "ops-tls", pair)); err != nil {
		return nil, err
	}
	auth := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "ops-auth"},
		StringData: map[string]string{"authfile": "bench:first-password\n"}}
	if err := e.c.Create(ctx, auth); err != nil {
		return nil, err
	}
	key := client.ObjectKey{Namespace: namespace, Name: opsName}
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: opsName}, Spec: cachev1alpha1.MemcachedSpec{
		Size: ptr.To[int32](3),
		TLS:  &cachev1alpha1.TLSSpec{SecretName: "ops-tls"},
		Auth: &cachev1alpha1.AuthSpec{SecretName: "ops-auth"},
		// The client's ring, and its poll (discoverEvery) with a second
		// of slack.
		KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: "libmemcached", ClientPollSeconds: ptr.To[int32](2)},
	}}
	if err := e.c.Create(ctx, mc); err != nil {
		return nil, err
	}
	r, err := newRing()
	if err != nil {
		return nil, err
	}
	a := access{user: "bench", pass: "first-password",
		tls: &tls.Config{RootCAs: ca.Pool(), ServerName: testcerts.ServiceHosts(namespace, opsName)[0], MinVersion: tls.VersionTLS12}}
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := discover(dctx, e.c, key, e.dns, a, r); err != nil {
		return nil, err
	}
	if err := converged(ctx, e.c, key, 3, r); err != nil {
		return nil, err
	}
	c := newClient(r, a, e.cfg.load.concurrency)
	defer c.Close()

	patch := func(obj client.Object, p string) error {
		return e.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(p)))
	}
	memcached := func() client.Object {
		return &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: opsName}}
	}
	// served waits until every pod of the ring serves what ok accepts on
	// a new connection: new Secret content is loaded in place, so no
	// StatefulSet change tells when it is.
	served := func(ok func(addr string) bool) func() error {
		return func() error {
			return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
				for _, addr := range r.list() {
					if !ok(addr) {
						return false, nil
					}
				}
				return true, nil
			})
		}
	}
	var renewed []byte // the new certificate's DER
	var deleted *corev1.Pod
	steps := []struct {
		name    string
		size    int32
		rolls   bool         // the StatefulSet changes
		long    bool         // left out of a short run
		empties bool         // memcached keeps no item across it: told, not a loss
		settled func() error // when it does not: the operation's end
		do      func() error
	}{
		{"scale 3 → 4", 4, true, false, false, nil, func() error { return patch(memcached(), `{"spec":{"size":4}}`) }},
		{"scale 4 → 3", 3, true, false, false, nil, func() error { return patch(memcached(), `{"spec":{"size":3}}`) }},
		{"a pod deleted (its slot's pod replaced)", 3, false, false, false, func() error {
			return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
				p := &corev1.Pod{}
				err := e.c.Get(ctx, client.ObjectKeyFromObject(deleted), p)
				return err == nil && p.UID != deleted.UID, nil
			})
		}, func() error {
			deleted = &corev1.Pod{}
			if err := e.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: opsName + "-1"}, deleted); err != nil {
				return err
			}
			return e.c.Delete(ctx, deleted)
		}},
		{"image rollout (the same memcached under another image name)", 3, true, false, false, nil, func() error {
			return patch(memcached(), `{"spec":{"image":"`+repo.Version("LOCAL_MEMCACHED_IMAGE_MINOR")+`"}}`)
		}},
		{"pod label change (on the pods, no restart)", 3, true, false, false, nil, func() error {
			return patch(memcached(), `{"spec":{"podLabels":{"team":"bench"}}}`)
		}},
		{"threads change (a setting memcached keeps; restarted in place)", 3, true, false, false, nil, func() error {
			return patch(memcached(), `{"spec":{"threads":2}}`)
		}},
		{"memory limit lowered 64 → 48 MiB (memcached cannot keep it; restarted in place, empty)", 3, true, true, true, nil, func() error {
			return patch(memcached(), `{"spec":{"memoryLimitMiB":48}}`)
		}},
		{"memory limit raised 48 → 96 MiB, past the pods' memory volume (the pods replaced)", 3, true, true, false, nil, func() error {
			return patch(memcached(), `{"spec":{"memoryLimitMiB":96}}`)
		}},
		{"certificate rotation (a new certificate from the same CA)", 3, false, true, false, served(func(addr string) bool {
			conn, err := a.dial(ctx, "tcp", addr)
			if err != nil {
				return false
			}
			defer conn.Close()
			return bytes.Equal(conn.(*tls.Conn).ConnectionState().PeerCertificates[0].Raw, renewed)
		}), func() error {
			p, err := ca.IssueForService(namespace, opsName)
			if err != nil {
				return err
			}
			kp, err := tls.X509KeyPair(p.Cert, p.Key)
			if err != nil {
				return err
			}
			renewed = kp.Certificate[0]
			return e.c.Update(ctx, ca.Secret(namespace, "ops-tls", p))
		}},
		{"authentication-file rotation (a second user added)", 3, false, true, false, served(func(addr string) bool {
			next := a
			next.user, next.pass = "next", "second-password"
			conn, err := next.dial(ctx, "tcp", addr)
			if err == nil {
				conn.Close()
			}
			return err == nil
		}), func() error {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "ops-auth"}}
			return patch(s, `{"stringData":{"authfile":"bench:first-password\nnext:second-password\n"}}`)
		}},
		{"operator upgrade that changes no pod setting (a new operator process of this build)", 3, false, false, false, nil, func() error {
			if err := e.operator.Stop(); err != nil {
				return err
			}
			return e.startOperator(ctx)
		}},
	}
	var out []operation
	for round, s := range steps {
		if e.cfg.short && s.long {
			// A Secret rotation: the e2e suite's
			// TestSecretRotationKeepsServing reads through them; each
			// waits a minute for the kubelet.
			continue
		}
		fmt.Fprintf(os.Stderr, "== %s\n", s.name)
		op := operation{name: s.name, keys: e.cfg.opKeys, moves: strings.HasPrefix(s.name, "scale "), empties: s.empties}
		load := e.cfg.load
		load.keys = e.cfg.opKeys
		if err := store(ctx, c, load, round); err != nil {
			return out, fmt.Errorf("%s: %w", s.name, err)
		}
		d := &appsv1.StatefulSet{}
		if err := e.c.Get(ctx, key, d); err != nil {
			return out, err
		}
		generation := d.Generation
		before, err := podsOf(ctx, e.c, mc)
		if err != nil {
			return out, err
		}
		op.pods = len(before)
		slotsBefore := r.names(e.cfg.opKeys)
		reading := startReading(ctx, r, a, e.cfg.opKeys)
		start := time.Now()
		if err := s.do(); err != nil {
			reading.stop()
			return out, fmt.Errorf("%s: %w", s.name, err)
		}
		switch {
		case s.rolls:
			err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
				err := e.c.Get(ctx, key, d)
				return err == nil && d.Generation > generation, nil
			})
		case s.settled != nil:
			err = s.settled()
		default:
			// Whatever the new process would change, it changes within
			// its first reconcile: a few seconds after it is ready.
			time.Sleep(10 * time.Second)
		}
		if err == nil {
			err = converged(ctx, e.c, key, s.size, r)
		}
		op.took = time.Since(start)
		reading.stop()
		if err != nil {
			return out, fmt.Errorf("%s: %w", s.name, err)
		}
		after, err := podsOf(ctx, e.c, mc)
		if err != nil {
			return out, err
		}
		op.replaced, op.podsAfter = replaced(before, after), len(after)
		stayed := stayedSlots(mc, before, after)
		restartedSlots := restartedSlots(mc, before, after)
		untouched := map[string]bool{}
		for name := range stayed {
			untouched[name] = !restartedSlots[name]
		}
		op.restarted = len(restartedSlots)
		op.reads, op.misses, op.firstError, op.p99 = reading.reads.Load(), reading.misses.Load(), reading.first(), reading.p99()
		if op.moves {
			if op.movedKeys, err = lastEvent(ctx, e.c, mc, "KeysMoved", start); err != nil {
				return out, err
			}
		}
		op.errors, op.errorsStayed, op.errorsFor = reading.errorsOn(untouched)
		_, op.errorsRestarted, _ = reading.errorsOn(restartedSlots)
		for i, name := range r.names(e.cfg.opKeys) {
			if name == slotsBefore[i] && stayed[name] {
				op.inPlace++
			}
		}
		if op.kept, op.stale, err = kept(ctx, c, e.cfg.opKeys, round); err != nil {
			return out, fmt.Errorf("%s: reading the keys: %w", s.name, err)
		}
		fmt.Fprintf(os.Stderr, "   kept %d of %d keys (%d in place, %d stale), %d errors in %d reads (%d on slots that stayed, %d on slots restarted in place), %d of %d pods replaced, %d restarted in place, %s\n",
			op.kept, op.keys, op.inPlace, op.stale, op.errors, op.reads, op.errorsStayed, op.errorsRestarted, op.replaced, op.pods, op.restarted, op.took.Round(time.Second))
		out = append(out, op)
	}
	return out, nil
}
