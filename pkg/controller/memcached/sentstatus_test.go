package memcached

import "testing"

// What the last status write tells of the apiserver while the cache has
// not shown it, and that the cache tells once it has.
func TestTheLastStatusWriteCountsUntilTheCacheShowsIt(t *testing.T) {
	// Written from the Memcached at version 10; the write made 12.
	w := sentStatus{over: "10", made: "12", body: "available: false"}
	for _, c := range []struct {
		name      string
		rv, body  string
		cacheSays bool
		want      bool
	}{
		// The one a StatefulSet recreated under it (a status held while its
		// controller had not reported, written, then the pods ready again)
		// needs: the cache's older status is the new one, the apiserver's
		// is not.
		{"cache not showing the write, another status the cache's", "10", "available: true", true, false},
		{"cache not showing the write, the same status again", "10", "available: false", false, true},
		{"cache not showing the write, at another's version before it", "11", "available: false", false, true},
		{"cache not showing the write, another status", "11", "available: true", false, false},
		{"cache showing the write: it tells", "12", "available: false", false, false},
		{"cache at a later version: it tells", "13", "available: true", true, true},
	} {
		if got := w.appliesNothing(c.rv, c.body, c.cacheSays); got != c.want {
			t.Errorf("%s: appliesNothing = %v, want %v", c.name, got, c.want)
		}
	}

	// Versions that do not compare as numbers: any but the one the write
	// was computed from counts as showing it.
	odd := sentStatus{over: "a", made: "b", body: "x"}
	if odd.appliesNothing("a", "y", true) {
		t.Errorf("unordered versions, the cache at the write's base: another status counted as applied")
	}
	if !odd.appliesNothing("c", "y", true) {
		t.Errorf("unordered versions, the cache past the write's base: the cache not trusted")
	}
}
