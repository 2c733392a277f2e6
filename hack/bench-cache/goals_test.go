package main

import (
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// row is a throughput row of ops operations in a second, each taking
// latency, with errors client-visible errors.
func row(name string, host bool, ops int64, latency time.Duration, errors int64) measured {
	h := hdrhistogram.New(1, 10_000_000, 3)
	for range ops {
		_ = h.RecordValue(latency.Microseconds())
	}
	return measured{target: target{name: name}, host: host,
		result: result{ops: ops, errors: errors, elapsed: time.Second, latency: h}}
}

func TestGoalsAreCheckedAgainstTheRun(t *testing.T) {
	a := row("(a) memcached on the host", true, 1000, time.Millisecond, 0)
	again := row("(a) memcached on the host, again", true, 1000, time.Millisecond, 0)
	b := row("(b) Memcached, size 1, defaults", false, 950, 1100*time.Microsecond, 0)
	rotation := operation{name: "certificate rotation", keys: 100, inPlace: 100, kept: 100, pods: 3, podsAfter: 3}
	rollout := operation{name: "image rollout", keys: 100, kept: 0, pods: 3, podsAfter: 3, replaced: 3, errors: 40}
	scaleUp := operation{name: "scale 3 → 4", keys: 100, inPlace: 75, kept: 99, pods: 3, podsAfter: 4, moves: true, p99: 3 * time.Millisecond, p99Rest: 2 * time.Millisecond}
	slowMove := scaleUp
	slowMove.p99 = 5 * time.Millisecond
	podDeleted := operation{name: "a pod deleted", keys: 100, inPlace: 66, kept: 66, pods: 3, podsAfter: 3, replaced: 1, errors: 12}
	const errs, keep = "no client-visible error in a throughput row, nor on a slot whose pod stays untouched through an operation", "an operation keeps every key whose slot stays, with the same pod"
	const moved = "a scale or a hand-off keeps at least 95% of the keys, with no stale value (spec.keyMoves)"
	const moveP99 = "the p99 of gets during a scale or a hand-off no worse than 2x the p99 at rest just before it"

	tests := []struct {
		name  string
		rows  []measured
		ops   []operation
		short bool
		unmet []string
	}{
		{"every goal met", []measured{a, b, again}, []operation{rotation, rollout, scaleUp, podDeleted}, false, nil},
		{"(b) too slow", []measured{a, row("(b) Memcached, size 1, defaults", false, 850, time.Millisecond, 0), again}, nil, false,
			[]string{"(b) at least 0.9 of (a) in ops/s"}},
		{"(b)'s p99 too long", []measured{a, row("(b) Memcached, size 1, defaults", false, 1000, 1300*time.Microsecond, 0), again}, nil, false,
			[]string{"(b)'s p99 no worse than 1.2x (a)'s"}},
		{"(b) too slow in a short run: reported, not held", []measured{a, row("(b) Memcached, size 1, defaults", false, 500, time.Millisecond, 0), again}, nil, true, nil},
		{"a client-visible error", []measured{a, row("(b) Memcached, size 1, defaults", false, 1000, time.Millisecond, 1), again}, nil, true, []string{errs}},
		{"an error on a slot that stayed", []measured{a, b, again}, []operation{{name: "scale", keys: 100, inPlace: 75, kept: 75, errors: 2, errorsStayed: 1, replaced: 1}}, true, []string{errs}},
		{"a key lost though its slot stayed", nil, []operation{{name: "certificate rotation", keys: 100, inPlace: 100, kept: 99, pods: 3, podsAfter: 3}}, true, []string{keep}},
		{"a stale value though its slot stayed", nil, []operation{{name: "operator upgrade", keys: 100, inPlace: 100, kept: 99, stale: 1, pods: 3, podsAfter: 3}}, true, []string{keep}},
		{"a key lost with its slot's pod replaced: no goal", nil, []operation{podDeleted}, false, nil},
		{"gets during a move too slow", nil, []operation{slowMove}, false, []string{moveP99}},
		{"gets during a move too slow in a short run: reported, not held", nil, []operation{slowMove}, true, nil},
		{"a scale that moves too few keys", nil, []operation{{name: "scale 3 → 4", keys: 100, inPlace: 75, kept: 80, pods: 3, podsAfter: 4, moves: true}}, true, []string{moved}},
		{"a scale that reads a stale value", nil, []operation{{name: "scale 4 → 3", keys: 100, inPlace: 75, kept: 98, stale: 1, pods: 4, podsAfter: 3, moves: true}}, true, []string{keep, moved}},
		// Measured and reported: the slot saves and restores meanwhile.
		{"errors while memcached restarts in place", nil, []operation{{name: "image change", keys: 100, inPlace: 100, kept: 100, errors: 4, errorsRestarted: 4, pods: 3, restarted: 3, podsAfter: 3}}, false, nil},
		{"a key lost though memcached restarted warm", nil, []operation{{name: "image change", keys: 100, inPlace: 100, kept: 90, pods: 3, restarted: 3, podsAfter: 3}}, false, []string{keep}},
		// Told beforehand and after: memcached keeps no item across it.
		{"every key lost where memcached restarts empty", nil, []operation{{name: "memory limit lowered", keys: 100, inPlace: 100, kept: 0, pods: 3, restarted: 3, podsAfter: 3, empties: true}}, false, nil},
		{"a stale value where memcached restarts empty", nil, []operation{{name: "memory limit lowered", keys: 100, inPlace: 100, kept: 0, stale: 1, pods: 3, restarted: 3, podsAfter: 3, empties: true}}, false, []string{keep}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, g := range unmet(goalsOf(tt.rows, tt.ops), tt.short) {
				got = append(got, g.name)
			}
			if len(got) != len(tt.unmet) {
				t.Fatalf("unmet %q, want %q", got, tt.unmet)
			}
			for i := range got {
				if got[i] != tt.unmet[i] {
					t.Fatalf("unmet %q, want %q", got, tt.unmet)
				}
			}
		})
	}
}

// A goal the run did not measure is neither met nor missed.
func TestGoalsNotMeasuredAreNotHeldAgainstTheRun(t *testing.T) {
	gs := goalsOf(nil, nil)
	for _, g := range gs {
		if g.checked {
			t.Errorf("%s checked without rows or operations", g.name)
		}
	}
	if len(unmet(gs, false)) != 0 {
		t.Errorf("unmet without measurements: %v", unmet(gs, false))
	}
}
