package main

import (
	"fmt"
	"slices"
	"testing"
)

// The hit ratio a client keeps through a scale from 3 to 4 pods depends on
// its selector: a consistent hash moves about a quarter of the keys (to
// the new server) and leaves the rest where they were, whatever the
// addresses (ketama's 160 points a server: between 0.686 and 0.793 kept
// over these 62 sets of addresses).
func TestRingMovesOnlyTheNewServersShare(t *testing.T) {
	// Pod addresses as the real node gives them: similar strings, where a
	// poorly mixed hash places servers unevenly.
	for base := 2; base < 250; base += 4 {
		var three []string
		for i := range 3 {
			three = append(three, fmt.Sprintf("10.244.0.%d:11211", base+i))
		}
		added := fmt.Sprintf("10.244.0.%d:11211", base+3)
		r, err := newRing(three...)
		if err != nil {
			t.Fatal(err)
		}
		const keys = 20000
		before := make([]string, keys)
		for i := range before {
			a, err := r.PickServer(key(i))
			if err != nil {
				t.Fatal(err)
			}
			before[i] = a.String()
		}
		if err := r.set(append(three, added)); err != nil {
			t.Fatal(err)
		}
		kept := 0
		for i := range before {
			a, err := r.PickServer(key(i))
			if err != nil {
				t.Fatal(err)
			}
			switch a.String() {
			case before[i]:
				kept++
			case added:
			default:
				t.Fatalf("key %d moved from %s to %s, an old server", i, before[i], a)
			}
		}
		if share := float64(kept) / keys; share < 0.67 || share > 0.81 {
			t.Fatalf("adding %s to %v kept %.3f of the keys, want about 3/4", added, three, share)
		}
	}
}

// A server named by its slot keeps its keys when its pod is replaced at a
// new address: the ring hashes the name, not the address.
func TestRingKeepsASlotsKeysAtItsNewAddress(t *testing.T) {
	slots := []member{
		{"cache-0.cache.ns.svc:11211", "10.244.0.5:11211"},
		{"cache-1.cache.ns.svc:11211", "10.244.0.6:11211"},
		{"cache-2.cache.ns.svc:11211", "10.244.0.7:11211"},
	}
	r := &ring{}
	if err := r.setMembers(slots); err != nil {
		t.Fatal(err)
	}
	const keys = 20000
	before := make([]int, keys)
	for i := range before {
		before[i] = slotOf(t, r, slots, key(i))
	}
	replaced := slices.Clone(slots)
	replaced[1].addr = "10.244.0.9:11211"
	if err := r.setMembers(replaced); err != nil {
		t.Fatal(err)
	}
	for i := range before {
		if got := slotOf(t, r, replaced, key(i)); got != before[i] {
			t.Fatalf("key %d moved from slot %d to slot %d when slot 1's pod was replaced", i, before[i], got)
		}
	}
}

// slotOf is the index in slots of the server r picks for key.
func slotOf(t *testing.T, r *ring, slots []member, key string) int {
	t.Helper()
	a, err := r.PickServer(key)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range slots {
		if m.addr == a.String() {
			return i
		}
	}
	t.Fatalf("%s picked %s, not a slot's address", key, a)
	return -1
}

func TestRingWithoutServers(t *testing.T) {
	r, err := newRing()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.PickServer(key(1)); err == nil {
		t.Fatal("a server picked from an empty ring")
	}
}

func key(i int) string { return fmt.Sprintf("key-%06d", i) }

// A read tells the value of a round from an older one, so that a key
// found on a pod it had moved away from is not counted as kept.
func TestValueTellsItsRound(t *testing.T) {
	for _, round := range []int{0, 1, 5, 123456} {
		if got := roundOf(valueOf(round, 1024)); got != round {
			t.Fatalf("round %d read back as %d", round, got)
		}
	}
	if got := roundOf([]byte("something else")); got != -1 {
		t.Fatalf("a foreign value read as round %d", got)
	}
}
