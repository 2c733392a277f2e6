package main

import (
	"fmt"
	"strings"
	"time"
)

// stepWindow is how long before and after a change of size its cost to
// the client is measured.
const stepWindow = 30 * time.Second

// stepCost is what a change of size cost the client: its hit ratio over
// stepWindow before the change and after it, its lowest bucket in the two
// windows after, and the held keys that read back before the change and
// after it (at the last reading before the next change, or two windows
// after, whichever comes first; -1 when none read).
type stepCost struct {
	from, to              int32
	at                    time.Duration
	before, after         float64
	lowest                float64
	heldBefore, heldAfter int
}

// stepCosts are the costs of series' changes of size, in order.
func stepCosts(series []point) []stepCost {
	var out []stepCost
	for i := 1; i < len(series); i++ {
		if series[i].size != series[i-1].size {
			out = append(out, stepCost{from: series[i-1].size, to: series[i].size, at: series[i].at, lowest: 1, heldBefore: -1, heldAfter: -1})
		}
	}
	for i := range out {
		c := &out[i]
		until := c.at + 2*stepWindow
		if i+1 < len(out) {
			until = min(until, out[i+1].at)
		}
		var bg, bh, ag, ah int
		for _, p := range series {
			switch d := p.at - c.at; {
			case d < 0 && d >= -stepWindow:
				bg, bh = bg+p.gets, bh+p.hits
			case d >= 0 && d < stepWindow:
				ag, ah = ag+p.gets, ah+p.hits
			}
			if d := p.at - c.at; d >= 0 && d < 2*stepWindow && p.gets > 0 {
				c.lowest = min(c.lowest, hitRatio(p.hits, p.gets))
			}
			switch {
			case p.held < 0:
			case p.at < c.at:
				c.heldBefore = p.held
			case p.at < until:
				c.heldAfter = p.held
			}
		}
		c.before, c.after = hitRatio(bh, bg), hitRatio(ah, ag)
	}
	return out
}

// renderStepCosts is the table of a run's steps and their cost.
func renderStepCosts(costs []stepCost) string {
	if len(costs) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "What each change of size cost `spec.autoscaling`'s client: its hit ratio over %s before it and after it, its lowest %s bucket in the %s after, and how many of the %d held keys read back before it and after it (at the last reading before the next change or %s after):\n\n", stepWindow, bucket, 2*stepWindow, heldCount, 2*stepWindow)
	b.WriteString("| change | at | before | after | lowest bucket after | held keys before → after |\n|---|---|---|---|---|---|\n")
	for _, c := range costs {
		fmt.Fprintf(&b, "| %d→%d | %s | %.1f%% | %.1f%% | %.1f%% | %s → %s |\n", c.from, c.to, c.at.Round(bucket), 100*c.before, 100*c.after, 100*c.lowest, heldRead(c.heldBefore), heldRead(c.heldAfter))
	}
	return b.String() + "\n"
}

func heldRead(n int) string {
	if n < 0 {
		return "not read"
	}
	return fmt.Sprint(n)
}
