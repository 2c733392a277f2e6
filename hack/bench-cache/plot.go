package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/example/memcached-operator/internal/testsupport/repo"
)

// writePlot draws each run's hit ratio (per bucket) and size over time
// into docs/benchmarks-autoscale.svg: two panels, the phases marked.
func writePlot(all []*scaled, ps []phase) error {
	const w, h, left, top, panel, gap = 900, 520, 60, 30, 200, 50
	var total time.Duration
	for _, p := range ps {
		total += p.for_
	}
	x := func(at time.Duration) float64 { return left + float64(w-left-20)*at.Seconds()/total.Seconds() }
	colors := []string{"#1f77b4", "#2ca02c", "#d62728"}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	panels := []struct {
		title string
		y0    float64
		max   float64
		value func(point) (float64, bool)
	}{
		{"hit ratio (per 10 s)", top, 1, func(p point) (float64, bool) { return hitRatio(p.hits, p.gets), p.gets > 0 }},
		{"slots (spec.size)", top + panel + gap, 4, func(p point) (float64, bool) { return float64(p.size), p.size >= 0 }},
	}
	for _, pn := range panels {
		y := func(v float64) float64 { return pn.y0 + panel - panel*v/pn.max }
		fmt.Fprintf(&b, `<text x="%d" y="%.0f">%s</text>`+"\n", left, pn.y0-8, pn.title)
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", left, pn.y0, w-left-20, panel)
		for _, v := range []float64{0, pn.max / 2, pn.max} {
			fmt.Fprintf(&b, `<text x="%d" y="%.0f" text-anchor="end">%g</text>`+"\n", left-6, y(v)+4, v)
		}
		end := time.Duration(0)
		for _, p := range ps[:len(ps)-1] {
			end += p.for_
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#ccc" stroke-dasharray="4"/>`+"\n", x(end), pn.y0, x(end), pn.y0+panel)
		}
		for i, s := range all {
			var pts []string
			for _, p := range s.series {
				if v, ok := pn.value(p); ok {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.at), y(v)))
				}
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", colors[i], strings.Join(pts, " "))
		}
	}
	for i, s := range all {
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", left+10+i*280, h-12, colors[i], s.label)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s of load</text>`+"\n", w-20, h-30, total)
	b.WriteString("</svg>\n")
	return os.WriteFile(repo.Path("docs", "benchmarks-autoscale.svg"), []byte(b.String()), 0o644)
}
