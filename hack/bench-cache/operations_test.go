package main

import (
	"context"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// kept tells a value stored in this round from one an earlier round left
// on a server the key has since moved away from and back to (stale), on
// two real memcacheds: the keys stored through a ring of one server, then
// of two, are read through the first ring again. Those the second server
// took read their first round's value from the first server: stale, as
// many as the second ring gave the new server. Read through the second
// ring, every key is current.
func TestKeptCountsStaleValuesOfKeysThatMovedBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := startTwoHostMemcacheds(t, ctx)

	const keys = 3000
	w := workload{concurrency: 4, keys: keys, valueSize: 64}
	one, err := newRing(a.addr)
	if err != nil {
		t.Fatal(err)
	}
	two, err := newRing(a.addr, b.addr)
	if err != nil {
		t.Fatal(err)
	}
	throughOne, throughTwo := newClient(one, access{}, 4), newClient(two, access{}, 4)
	defer throughOne.Close()
	defer throughTwo.Close()

	if err := store(ctx, throughOne, w, 0); err != nil {
		t.Fatal(err)
	}
	if err := store(ctx, throughTwo, w, 1); err != nil {
		t.Fatal(err)
	}
	moved := keysOn(t, two, keys, b.addr)
	if moved == 0 || moved == keys {
		t.Fatalf("the second ring gave the new server %d of %d keys: no test of both cases", moved, keys)
	}

	current, stale, err := kept(ctx, throughOne, keys, 1)
	if err != nil {
		t.Fatal(err)
	}
	if stale != moved || current != keys-moved {
		t.Errorf("through the first ring again: %d current and %d stale, want %d and %d", current, stale, keys-moved, moved)
	}
	current, stale, err = kept(ctx, throughTwo, keys, 1)
	if err != nil {
		t.Fatal(err)
	}
	if stale != 0 || current != keys {
		t.Errorf("through the second ring: %d current and %d stale, want %d and 0", current, stale, keys)
	}
	// A round that was never stored is read as no key's current value.
	if current, _, err = kept(ctx, throughTwo, keys, 2); err != nil || current != 0 {
		t.Errorf("round 2, never stored: %d current (%v), want 0", current, err)
	}
}

// startTwoHostMemcacheds starts two memcacheds on the host until the test
// ends.
func startTwoHostMemcacheds(t *testing.T, ctx context.Context) (a, b *hostMemcached) {
	a, err := startHostMemcached(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.stop)
	b, err = startHostMemcached(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.stop)
	return a, b
}

// keysOn is how many of the first keys keys r puts on addr.
func keysOn(t *testing.T, r *ring, keys int, addr string) int {
	n := 0
	for i := range keys {
		at, err := r.PickServer(keyOf(i))
		if err != nil {
			t.Fatal(err)
		}
		if at.String() == addr {
			n++
		}
	}
	return n
}

// A slot stays through an operation when its pod is the same one after
// it: not a pod replaced in the slot (a new UID), nor one removed.
func TestStayedSlotsAreThoseThatKeptTheirPod(t *testing.T) {
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ops"}}
	pod := func(name, uid string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}}
	}
	before := []corev1.Pod{pod("ops-0", "a"), pod("ops-1", "b"), pod("ops-2", "c"), pod("ops-3", "d")}
	after := []corev1.Pod{pod("ops-0", "a"), pod("ops-1", "b2"), pod("ops-2", "c")}
	got := stayedSlots(m, before, after)
	want := map[string]bool{"ops-0.ops.ns.svc:11211": true, "ops-2.ops.ns.svc:11211": true}
	if !maps.Equal(got, want) {
		t.Fatalf("stayed %v, want %v", got, want)
	}
}
