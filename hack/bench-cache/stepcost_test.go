package main

import (
	"testing"
	"time"
)

// A change of size is measured over the buckets either side of it.
func TestAStepsCostIsTheHitRatioEitherSideOfIt(t *testing.T) {
	at := func(s int) time.Duration { return time.Duration(s) * time.Second }
	series := []point{
		{at(0), 100, 50, 1, 1000}, {at(10), 100, 90, 1, 1000}, {at(20), 100, 90, 1, 1000}, {at(30), 100, 90, 1, 1000},
		{at(40), 100, 60, 2, -1}, {at(50), 100, 80, 2, 990}, {at(60), 100, 100, 2, 990},
		{at(70), 100, 100, 2, 990}, {at(80), 100, 100, 2, 990}, {at(90), 100, 100, 2, 990}, {at(100), 100, 95, 2, 980},
	}
	got := stepCosts(series)
	if len(got) != 1 {
		t.Fatalf("steps %+v, want one", got)
	}
	c := got[0]
	if c.from != 1 || c.to != 2 || c.at != at(40) {
		t.Errorf("step %d→%d at %s, want 1→2 at 40s", c.from, c.to, c.at)
	}
	if c.before != 0.9 || c.after != 0.8 || c.lowest != 0.6 {
		t.Errorf("before %.2f, after %.2f, lowest %.2f; want 0.90 (10s to 30s), 0.80 (40s to 60s), 0.60", c.before, c.after, c.lowest)
	}
	if c.heldBefore != 1000 || c.heldAfter != 990 {
		t.Errorf("held keys %d → %d, want 1000 → 990 (the last reading within 60 s of the step; the failed one left out)", c.heldBefore, c.heldAfter)
	}
	if len(stepCosts(series[:4])) != 0 {
		t.Error("a series with no change of size has no step")
	}
}

// The held keys after a step are read before the next step, so that the
// keys a step loses are not put on the one before it.
func TestAStepsHeldKeysAreReadBeforeTheNext(t *testing.T) {
	at := func(s int) time.Duration { return time.Duration(s) * time.Second }
	series := []point{
		{at(0), 100, 90, 1, 1000}, {at(10), 100, 90, 2, 1000}, {at(20), 100, 90, 2, 1000},
		{at(30), 100, 90, 3, 1000}, {at(40), 100, 90, 3, 900}, {at(50), 100, 90, 3, 900},
	}
	got := stepCosts(series)
	if len(got) != 2 {
		t.Fatalf("steps %+v, want two", got)
	}
	if got[0].heldBefore != 1000 || got[0].heldAfter != 1000 {
		t.Errorf("first step's held keys %d → %d, want 1000 → 1000", got[0].heldBefore, got[0].heldAfter)
	}
	if got[1].heldBefore != 1000 || got[1].heldAfter != 900 {
		t.Errorf("second step's held keys %d → %d, want 1000 → 900", got[1].heldBefore, got[1].heldAfter)
	}
}
