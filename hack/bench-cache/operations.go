package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/testsupport/repo"
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
	// p99 of the gets answered during the operation, and p99Rest of
	// those of the same reads at rest just before it.
	p99, p99Rest time.Duration
	// movedKeys is what the operator said of the keys it moved (its
	// KeysMoved events, oldest first), when it moved some.
	movedKeys string
	// keysLost is the operator's last KeysLost event during the
	// operation: a slot whose pod went without handing its keys off.
	keysLost   string
	firstError string
	// evicted is the items the memcacheds the client followed evicted
	// during the operation, each process's counted from when it was first
	// read (from 0 when it started during the operation).
	evicted        uint64
	replaced, pods int // pods replaced, of pods before
	restarted      int // pods whose memcached restarted in place
	podsAfter      int
	// moves: the operation changes the slots, or restarts or replaces
	// pods whose keys the operator hands off first, and the operator moves
	// the keys (spec.keyMoves).
	moves bool
	// empties: memcached keeps no item across the operation (a new memory
	// limit), and the operator says so: the keys it loses are no miss.
	empties bool
}

// opsName is the Memcached the operations are done to: size 3, TLS and
// authentication, keys moved on a scale (spec.keyMoves), so that every
// operation can be tried on it.
const opsName = "ops"

// opsMemoryMiB is its memcached's memory limit before the memory limit's
// operations (lowered to 96, then raised to 160 MiB).
const opsMemoryMiB = 128

// operations stores opKeys keys in a Memcached of size 3 with TLS and
// authentication before each operation, reads them while the operation
// runs and every one of them after it.
func (e *env) operations(ctx context.Context) ([]operation, error) {
	o, stop, err := e.startOps(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	var out []operation
	for round, s := range o.steps() {
		if len(e.cfg.only) > 0 && !slices.ContainsFunc(e.cfg.only, func(text string) bool { return strings.Contains(s.name, text) }) {
			continue
		}
		if e.cfg.short && s.long {
			// A Secret rotation: the e2e suite's
			// TestSecretRotationKeepsServing reads through them; each
			// waits a minute for the kubelet.
			continue
		}
		fmt.Fprintf(os.Stderr, "== %s\n", s.name)
		op, err := o.run(round, s)
		if err != nil {
			return out, err
		}
		fmt.Fprintf(os.Stderr, "   kept %d of %d keys (%d in place, %d stale), %d errors in %d reads (%d on slots that stayed, %d on slots restarted in place), %d of %d pods replaced, %d restarted in place, %s\n",
			op.kept, op.keys, op.inPlace, op.stale, op.errors, op.reads, op.errorsStayed, op.errorsRestarted, op.replaced, op.pods, op.restarted, op.took.Round(time.Second))
		out = append(out, op)
	}
	return out, nil
}

// nextRate is the move rate the operations set, other than the one the
// Memcached starts with (-keys-per-second).
func (o *opsRun) nextRate() int {
	if o.e.cfg.keysPerSecond == 50000 {
		return 60000
	}
	return 50000
}

// opStep is one operation: what it does, and when it is done.
type opStep struct {
	name    string
	size    int32
	rolls   bool         // the StatefulSet changes
	long    bool         // left out of a short run (bench-cache-check)
	empties bool         // memcached keeps no item across it: told, not a loss
	settled func() error // when it does not: the operation's end
	do      func() error
}

// steps are the operations, in the order they are done.
func (o *opsRun) steps() []opStep {
	return []opStep{
		{"scale 3 → 4", 4, true, false, false, nil, func() error { return o.patch(o.memcached(), `{"spec":{"size":4}}`) }},
		{"scale 4 → 3", 3, true, false, false, nil, func() error { return o.patch(o.memcached(), `{"spec":{"size":3}}`) }},
		{"a pod deleted with its grace period (its keys handed off, its slot's pod replaced)", 3, false, false, false, o.evictedReplaced,
			func() error { return o.deleteWith(nil, 1) }},
		{"two pods deleted at once with their grace period (their keys handed off to the slot that stays; no budget holds a delete)", 3, false, false, false, o.evictedReplaced,
			func() error { return o.deleteWith(nil, 0, 1) }},
		{"a second pod deleted as the first one's hand-off is published (their keys handed off; the second, not yet told, from the membership that lists both)", 3, false, false, false, o.evictedReplaced,
			func() error { return o.deleteAtPublication(0, 1) }},
		{"a pod evicted through the Eviction API (its keys handed off, its slot's pod replaced)", 3, false, false, false, o.evictedReplaced,
			func() error { return o.evict(2) }},
		{"a drain: every pod evicted as kubectl drain evicts (each one's keys handed off in turn)", 3, false, false, false, o.evictedReplaced,
			func() error { return o.evict(0, 1, 2) }},
		{"a pod deleted with a grace period of 0 (its API object goes at once: the operator publishes no membership without it)", 3, false, false, false, o.evictedReplaced,
			func() error { return o.deleteWith(client.GracePeriodSeconds(0), 0) }},
		{"image rollout (the same memcached under another image name)", 3, true, false, false, nil, func() error {
			return o.patch(o.memcached(), `{"spec":{"image":"`+repo.Version("LOCAL_MEMCACHED_IMAGE_MINOR")+`"}}`)
		}},
		{"pod label change (on the pods, no restart)", 3, true, false, false, nil, func() error {
			return o.patch(o.memcached(), `{"spec":{"podLabels":{"team":"bench"}}}`)
		}},
		{"threads change (a setting memcached keeps; restarted in place)", 3, true, false, false, nil, func() error {
			return o.patch(o.memcached(), `{"spec":{"threads":2}}`)
		}},
		{"memory limit lowered 128 → 96 MiB (memcached cannot keep it: each pod's keys handed off, memcached restarted in place, empty)", 3, true, true, true, nil, func() error {
			return o.patch(o.memcached(), `{"spec":{"memoryLimitMiB":96}}`)
		}},
		{"memory limit raised 96 → 160 MiB, past the pods' memory volume (each pod's keys handed off, the pod replaced)", 3, true, true, false, nil, func() error {
			return o.patch(o.memcached(), `{"spec":{"memoryLimitMiB":160}}`)
		}},
		// Left out of a short run, as the port change below: it replaces
		// every pod, as the memory limit raised does, which a short run
		// keeps.
		{fmt.Sprintf("move rate changed to %d,000 keys a second (a new pod shape: each pod's keys handed off, the pod replaced)", o.nextRate()/1000), 3, true, true, false, nil, func() error {
			return o.patch(o.memcached(), fmt.Sprintf(`{"spec":{"keyMoves":{"keysPerSecond":%d}}}`, o.nextRate()))
		}},
		{"port change 11211 → 11311 (each pod's keys handed off, the pod replaced)", 3, true, true, false, nil, func() error {
			return o.patch(o.memcached(), `{"spec":{"containerPort":11311}}`)
		}},
		{"certificate rotation (a new certificate from the same CA)", 3, false, true, false, o.served(func(addr string) bool {
			conn, err := o.a.dial(o.ctx, "tcp", addr)
			if err != nil {
				return false
			}
			defer conn.Close()
			return bytes.Equal(conn.(*tls.Conn).ConnectionState().PeerCertificates[0].Raw, o.renewed)
		}), func() error {
			p, err := o.ca.IssueForService(namespace, opsName)
			if err != nil {
				return err
			}
			kp, err := tls.X509KeyPair(p.Cert, p.Key)
			if err != nil {
				return err
			}
			o.renewed = kp.Certificate[0]
			return o.e.c.Update(o.ctx, o.ca.Secret(namespace, "ops-tls", p))
		}},
		{"authentication-file rotation (a second user added)", 3, false, true, false, o.served(func(addr string) bool {
			next := o.a
			next.user, next.pass = "next", "second-password"
			conn, err := next.dial(o.ctx, "tcp", addr)
			if err == nil {
				conn.Close()
			}
			return err == nil
		}), func() error {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "ops-auth"}}
			return o.patch(s, `{"stringData":{"authfile":"bench:first-password\nnext:second-password\n"}}`)
		}},
		{"operator upgrade that changes no pod setting (a new operator process of this build)", 3, false, false, false, nil, func() error {
			if err := o.e.operator.Stop(); err != nil {
				return err
			}
			return o.e.startOperator(o.ctx)
		}},
	}
}
