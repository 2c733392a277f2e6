package memcached

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	cacheac "github.com/example/memcached-operator/applyconfig/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/status"
)

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

// A status write that follows another before the cache shows the first
// does not tell the first's problems again: the events compare with the
// status the apiserver holds, the first write's.
func TestAProblemWrittenIsNotToldAgainBeforeTheCacheShowsIt(t *testing.T) {
	problem := &status.SecretProblem{Reason: cachev1alpha1.ReasonSecretMissing, Message: "Secret cache-tls does not exist"}
	written := cacheac.Memcached("cache", "ns").WithStatus(cacheac.MemcachedStatus().WithConditions(
		metav1ac.Condition().WithType(cachev1alpha1.ConditionStalled).WithStatus(metav1.ConditionTrue).
			WithReason(problem.Reason).WithMessage(problem.Message)))
	body, err := json.Marshal(written)
	if err != nil {
		t.Fatal(err)
	}
	// Written from the Memcached at version 10, whose status said nothing
	// of the Secret; the write made 12.
	w := sentStatus{over: "10", made: "12", body: string(body)}
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache", ResourceVersion: "10"}}

	told := func(held *cachev1alpha1.Memcached) int {
		var notes []string
		s := newScope(&Reconciler{Recorder: recorderFunc(func(note string) { notes = append(notes, note) })}, m)
		s.obs.Secret = problem
		s.recordStatusEvents(held)
		return len(notes)
	}
	if n := told(w.heldOver(m)); n != 0 {
		t.Errorf("the cache not showing the write that said it: the problem told %d times again", n)
	}
	// The positive control: the cache's own status has not said it.
	if n := told(m); n != 1 {
		t.Errorf("compared with the cache's older status: told %d times, want 1", n)
	}
	// Once the cache shows the write, the cache tells: here a status that
	// has not said it (one written since by another, say).
	m12 := m.DeepCopy()
	m12.ResourceVersion = "12"
	if n := told(w.heldOver(m12)); n != 1 {
		t.Errorf("the cache showing the write: told %d times, want 1", n)
	}
}
