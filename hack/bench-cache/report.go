package main

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/example/memcached-operator/internal/testsupport/repo"
)

// render is the markdown report of a run.
func render(e *env, rows []measured, ops []operation) string {
	var b strings.Builder
	w := e.cfg.load
	fmt.Fprintf(&b, "### Run of %s (%s, %d CPUs)\n\n", e.started.UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.NumCPU())
	fmt.Fprintf(&b, "Client: gomemcache with a consistent-hash selector, on this machine; %d goroutines, %d keys of %d bytes, %.0f%% gets and %.0f%% sets; %s warm-up, then %s measured per target. Memcacheds on the real node (kubelet %s), memcached %s from the node's image.\n\n",
		w.concurrency, w.keys, w.valueSize, w.getRatio*100, (1-w.getRatio)*100, w.warmUp, w.duration, repo.NodeVersion(), repo.Version("LOCAL_MEMCACHED_IMAGE"))
	if len(rows) > 0 {
		var limit *measured
		for i := range rows {
			if rows[i].host {
				limit = &rows[i]
				break
			}
		}
		b.WriteString("| target | ops/s | vs (a) | p50 | vs (a) | p99 | vs (a) | errors | CPU µs per op: client, memcached |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rows {
			note := ""
			if r.scrape {
				note = fmt.Sprintf(" (scraped %d times, every %s)", r.scrapes, scrapeInterval)
			}
			fmt.Fprintf(&b, "| %s%s | %.0f | %s | %s | %s | %s | %s | %d | %.1f, %.1f |\n", r.name, note,
				r.opsPerSecond(), ratio(r.opsPerSecond(), limit.opsPerSecond()),
				micro(r.percentile(50)), ratio(float64(r.percentile(50)), float64(limit.percentile(50))),
				micro(r.percentile(99)), ratio(float64(r.percentile(99)), float64(limit.percentile(99))), r.errors,
				r.cpuPerOp(r.clientCPU), r.cpuPerOp(r.memcachedCPU))
		}
		for _, r := range rows {
			if r.host && r.cgroup == "" {
				fmt.Fprintf(&b, "\n%s ran without a CPU cgroup like the pods' (no cgroup v1 kubepods here): it competed with the client as one thread among equals, the pods as one group.\n", r.name)
			}
			if r.errors > 0 {
				fmt.Fprintf(&b, "\n%s: first error: %s\n", r.name, r.firstError)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString(renderGoals(goalsOf(rows, ops), e.cfg.short))
	if len(ops) > 0 {
		fmt.Fprintf(&b, "Through operations: a Memcached of size 3 with TLS and authentication; before each, %d keys of %d bytes stored; during it, gets of random keys at up to %d a second; after it, every key read once.\n\n",
			e.cfg.opKeys, w.valueSize, readers*int(time.Second/readInterval))
		b.WriteString("| operation | keys kept | of keys whose slot stayed | stale values read | pods replaced | memcached restarted in place | gets during | misses during | p99 of gets during | p99 at rest before | errors (on slots untouched; restarted in place), over | took |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, o := range ops {
			fmt.Fprintf(&b, "| %s | %.1f%% (%d) | %d | %d | %d of %d | %d | %d | %d | %s | %s | %d (%d; %d), %s | %s |\n", o.name, 100*float64(o.kept)/float64(o.keys), o.kept, o.inPlace, o.stale,
				o.replaced, o.pods, o.restarted, o.reads, o.misses, micro(o.p99), micro(o.p99Rest), o.errors, o.errorsStayed, o.errorsRestarted, o.errorsFor.Round(100*time.Millisecond), o.took.Round(100*time.Millisecond))
		}
		opNotes(&b, ops)
	}
	return b.String()
}

// opNotes writes, under the operations' table, what the operator said of
// the keys it moved and lost, the items memcached evicted, and each
// operation's first error.
func opNotes(b *strings.Builder, ops []operation) {
	for _, o := range ops {
		if o.moves {
			fmt.Fprintf(b, "\n%s: the operator's KeysMoved events: %s\n", o.name, o.movedKeys)
		}
	}
	for _, o := range ops {
		if o.keysLost != "" && o.keysLost != "none" {
			fmt.Fprintf(b, "\n%s: the operator's KeysLost event: %s\n", o.name, o.keysLost)
		}
	}
	for _, o := range ops {
		if o.evicted > 0 {
			fmt.Fprintf(b, "\n%s: memcached evicted %d items during it (the memory of the slots that held the keys)\n", o.name, o.evicted)
		}
	}
	for _, o := range ops {
		if o.errors > 0 {
			fmt.Fprintf(b, "\n%s: first error: %s\n", o.name, o.firstError)
		}
	}
}

func ratio(v, of float64) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v/of)
}

func micro(d time.Duration) string {
	return fmt.Sprintf("%d µs", d.Microseconds())
}

// renderGoals is the table of the goals a run checked.
func renderGoals(gs []goal, short bool) string {
	var b strings.Builder
	b.WriteString("| goal | measured | met |\n|---|---|---|\n")
	for _, g := range gs {
		met := "no"
		switch {
		case !g.checked:
			met, g.measure = "not measured in this run", "-"
		case g.met:
			met = "yes"
		case short && g.speed:
			met = "no (a short run: not held against it)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", g.name, g.measure, met)
	}
	b.WriteString("\n")
	return b.String()
}
