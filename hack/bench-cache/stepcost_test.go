package main

import (
	"testing"
	"time"
)

// A change of size is measured over the buckets either side of it.
func TestAStepsCostIsTheHitRatioEitherSideOfIt(t *testing.T) {
	at := func(s int) time.Duration { return time.Duration(s) * time.Second }
	series := []point{
		{at(0), 100, 50, 1}, {at(10), 100, 90, 1}, {at(20), 100, 90, 1}, {at(30), 100, 90, 1},
		{at(40), 100, 60, 2}, {at(50), 100, 80, 2}, {at(60), 100, 100, 2},
		{at(70), 100, 100, 2}, {at(80), 100, 100, 2}, {at(90), 100, 95, 2},
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
	if len(stepCosts(series[:4])) != 0 {
		t.Error("a series with no change of size has no step")
	}
}
