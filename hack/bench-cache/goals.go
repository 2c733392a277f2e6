package main

import (
	"fmt"
	"strings"
	"time"
)

// goal is a promise of the report, checked against a run.
type goal struct {
	name string
	// speed: a figure of how fast, which only a full run on a quiet
	// machine measures; a short run reports it but does not check it.
	speed bool
	// checked: the run measured what the goal needs.
	checked bool
	met     bool
	measure string
}

// Goals of throughput: the pods' price against memcached on the host.
const (
	minThroughputRatio = 0.9
	maxP99Ratio        = 1.2
)

// goalsOf checks the goals on a run's rows and operations. (a) is the mean
// of memcached on the host's first and last runs, so that a drift of the
// machine over the run counts for neither side.
func goalsOf(rows []measured, ops []operation) []goal {
	throughput, latency := speedGoals(rows)
	inPlace, moved := keyGoals(ops)
	return []goal{throughput, latency, errorGoal(rows, ops), inPlace, moved, moveLatencyGoal(ops)}
}

// speedGoals compare the throughput and p99 of a Memcached of size 1 with
// memcached run on the host.
func speedGoals(rows []measured) (throughput, latency goal) {
	var hosts []measured
	var defaults *measured
	for i, r := range rows {
		switch {
		case r.host:
			hosts = append(hosts, r)
		case defaults == nil && strings.HasPrefix(r.name, "(b) Memcached, size 1, defaults"):
			defaults = &rows[i]
		}
	}
	throughput = goal{name: fmt.Sprintf("(b) at least %.1f of (a) in ops/s", minThroughputRatio), speed: true}
	latency = goal{name: fmt.Sprintf("(b)'s p99 no worse than %.1fx (a)'s", maxP99Ratio), speed: true}
	if defaults != nil && len(hosts) > 0 {
		var ops, p99 float64
		for _, h := range hosts {
			ops += h.opsPerSecond() / float64(len(hosts))
			p99 += float64(h.percentile(99)) / float64(len(hosts))
		}
		throughput.checked, latency.checked = true, true
		throughput.met = defaults.opsPerSecond() >= minThroughputRatio*ops
		throughput.measure = fmt.Sprintf("%.0f against %.0f: %.2f", defaults.opsPerSecond(), ops, defaults.opsPerSecond()/ops)
		latency.met = float64(defaults.percentile(99)) <= maxP99Ratio*p99
		latency.measure = fmt.Sprintf("%s against %s: %.2fx", micro(defaults.percentile(99)), micro(time.Duration(p99)), float64(defaults.percentile(99))/p99)
	}
	return throughput, latency
}

// errorGoal: no client sees an error but where a slot's pod goes or
// restarts.
func errorGoal(rows []measured, ops []operation) goal {
	// A slot whose pod is replaced or removed stays in the membership
	// until its new pod has an address, or until the membership without
	// it reaches the client (docs/discovery.md): its keys' gets fail
	// meanwhile. So do a slot's whose memcached restarts in place, while
	// it saves and restores (the report counts them). Any other error is
	// one a client should never see.
	errs := goal{name: "no client-visible error in a throughput row, nor on a slot whose pod stays untouched through an operation", checked: len(rows)+len(ops) > 0, met: true}
	var failing []string
	for _, r := range rows {
		if r.errors > 0 {
			failing = append(failing, fmt.Sprintf("%s: %d", r.name, r.errors))
		}
	}
	for _, o := range ops {
		if o.errorsStayed > 0 {
			failing = append(failing, fmt.Sprintf("%s: %d", o.name, o.errorsStayed))
		}
	}
	if len(failing) > 0 {
		errs.met, errs.measure = false, strings.Join(failing, "; ")
	} else {
		errs.measure = "0"
	}
	return errs
}

// keyGoals: every operation keeps the keys of the slots that stay, and a
// scale keeps nearly all.
func keyGoals(ops []operation) (inPlace, moved goal) {
	inPlace = goal{name: "an operation keeps every key whose slot stays, with the same pod", checked: len(ops) > 0, met: true}
	moved = goal{name: fmt.Sprintf("a scale or a hand-off keeps at least %.0f%% of the keys, with no stale value (spec.keyMoves)", 100*minMovedKept), met: true}
	var lost, kept, scales []string
	for _, o := range ops {
		if o.empties {
			// Told beforehand and after; a stale value is still one.
			kept = append(kept, "none (memcached keeps no item across it)")
			if o.stale > 0 {
				lost = append(lost, fmt.Sprintf("%s: %d stale", o.name, o.stale))
			}
			continue
		}
		kept = append(kept, fmt.Sprintf("%d", o.inPlace))
		// A stale value is a key not kept; a key kept beyond those in
		// place was moved.
		if o.kept < o.inPlace || o.stale > 0 {
			lost = append(lost, fmt.Sprintf("%s: %d of %d kept, %d stale", o.name, o.kept, o.inPlace, o.stale))
		}
		if o.moves {
			moved.checked = true
			share := float64(o.kept) / float64(o.keys)
			scales = append(scales, fmt.Sprintf("%s: %.1f%%, %d stale", o.name, 100*share, o.stale))
			if share < minMovedKept || o.stale > 0 {
				moved.met = false
			}
		}
	}
	if len(lost) > 0 {
		inPlace.met, inPlace.measure = false, strings.Join(lost, "; ")
	} else if inPlace.checked {
		inPlace.measure = "every one: " + strings.Join(kept, ", ") + " (the operations in order)"
	}
	if moved.checked {
		moved.measure = strings.Join(scales, "; ")
	}
	return inPlace, moved
}

// maxMoveP99Ratio bounds the p99 of gets during a move against the p99 of
// the same reads at rest just before it.
const maxMoveP99Ratio = 2.0

// moveLatencyGoal: the gets during a scale or a hand-off are not much
// slower than at rest, though each pod copies keys meanwhile.
func moveLatencyGoal(ops []operation) goal {
	g := goal{name: fmt.Sprintf("the p99 of gets during a scale or a hand-off no worse than %.0fx the p99 at rest just before it", maxMoveP99Ratio), speed: true, met: true}
	var each []string
	for _, o := range ops {
		if !o.moves || o.p99Rest <= 0 {
			continue
		}
		g.checked = true
		ratio := float64(o.p99) / float64(o.p99Rest)
		name, _, _ := strings.Cut(o.name, " (")
		each = append(each, fmt.Sprintf("%s: %s against %s, %.2fx", name, micro(o.p99), micro(o.p99Rest), ratio))
		if ratio > maxMoveP99Ratio {
			g.met = false
		}
	}
	g.measure = strings.Join(each, "; ")
	return g
}

// minMovedKept is the share of keys a scale keeps when the keys move.
const minMovedKept = 0.95

// unmet are the goals of gs the run checked and did not meet; a short
// run's figures of speed are not held against it.
func unmet(gs []goal, short bool) []goal {
	var out []goal
	for _, g := range gs {
		if g.checked && !g.met && !(short && g.speed) {
			out = append(out, g)
		}
	}
	return out
}
