package ring

import (
	"fmt"
	"slices"
	"testing"
)

// slots is n slots' names as the discovery endpoint lists them.
func slots(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("cache-%d.cache.ns.svc:11211", i)
	}
	return out
}

func mustNew(t *testing.T, hash Hash, servers []string) *Ring {
	t.Helper()
	r, err := New(hash, servers)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAServerAddedTakesKeysFromTheOthersOnly: with libmemcached's ring a
// slot added takes its share of the keys and no other key moves, the
// property a scale relies on to move only the keys of the slots it adds
// or removes.
func TestAServerAddedTakesKeysFromTheOthersOnly(t *testing.T) {
	const keys = 30000
	for n := 1; n <= 12; n++ {
		before, after := mustNew(t, Libmemcached, slots(n)), mustNew(t, Libmemcached, slots(n+1))
		added := slots(n + 1)[n]
		moved := 0
		for i := range keys {
			key := fmt.Sprintf("key-%d", i)
			was, is := before.Server(key), after.Server(key)
			switch {
			case was == is:
			case is == added:
				moved++
			default:
				t.Fatalf("%d -> %d servers: %s moved from %s to %s, neither of them added", n, n+1, key, was, is)
			}
		}
		share := float64(moved) / keys
		if want := 1 / float64(n+1); share < want*0.6 || share > want*1.4 {
			t.Errorf("%d -> %d servers: the added one took %.1f%% of the keys, want about %.1f%%", n, n+1, 100*share, 100*want)
		}
	}
}

// TestRoundingMovesKeysBetweenTheOthers: at the sizes where a family's
// rounding gives each server 39 digests rather than 40 (measured with the
// clients: TestClientsPutKeysWhereTheRingDoes at 7 and 25 servers), a slot
// added or removed also moves keys between the slots that stay: a move
// must compute each key's owner before and after, not assume that only
// the added or removed slot's keys change hands.
func TestRoundingMovesKeysBetweenTheOthers(t *testing.T) {
	want := map[Hash][]int{
		Node:         {7, 14, 28, 49, 56, 98, 103, 112},
		Libmemcached: {25, 47, 50, 55, 61, 71, 94, 100, 107, 109, 110, 115, 122},
	}
	for hash, sizes := range want {
		var got []int
		for n := 1; n <= 128; n++ {
			if d, _ := digestsOf(hash, n); d != digestsPerServer {
				got = append(got, n)
			}
		}
		if !slices.Equal(got, sizes) {
			t.Errorf("%s: 39 digests at %v servers, want %v", hash, got, sizes)
		}
	}
	for hash, n := range map[Hash]int{Node: 7, Libmemcached: 25} {
		before, after := mustNew(t, hash, slots(n-1)), mustNew(t, hash, slots(n))
		between := 0
		for i := range 30000 {
			key := fmt.Sprintf("key-%d", i)
			if was, is := before.Server(key), after.Server(key); was != is && is != slots(n)[n-1] {
				between++
			}
		}
		if between == 0 {
			t.Errorf("%s's ring %d -> %d: no key moved between the slots that stayed, though each lost a digest", hash, n-1, n)
		}
		t.Logf("%s's ring %d -> %d: %d of 30000 keys moved between the slots that stayed", hash, n-1, n, between)
	}
}

// TestTheListsOrderDoesNotMatter: clients list the servers as they got
// them (memcached-elasticache sorted, libmemcached as given).
func TestTheListsOrderDoesNotMatter(t *testing.T) {
	s := slots(5)
	reversed := slices.Clone(s)
	slices.Reverse(reversed)
	for _, hash := range []Hash{Libmemcached, Node} {
		a, b := mustNew(t, hash, s), mustNew(t, hash, reversed)
		for i := range 30000 {
			key := fmt.Sprintf("key-%d", i)
			if a.Server(key) != b.Server(key) {
				t.Fatalf("%s: %s goes to %s or %s by the list's order", hash, key, a.Server(key), b.Server(key))
			}
		}
	}
}

func TestBadInput(t *testing.T) {
	if _, err := New("crc32", slots(2)); err == nil {
		t.Error("an unknown hash was accepted")
	}
	for _, s := range []string{"cache-0", "cache-0:port", ""} {
		if _, err := New(Libmemcached, []string{s}); err == nil {
			t.Errorf("server %q was accepted", s)
		}
	}
	r := mustNew(t, Node, nil)
	if got := r.Server("k"); got != "" {
		t.Errorf("an empty ring put a key on %q", got)
	}
}
