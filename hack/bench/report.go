package main

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// memTotal is the machine's memory, for the report's header.
func memTotal() string {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "MemTotal:") {
			kb, _ := strconv.Atoi(strings.Fields(l)[1])
			return fmt.Sprintf("%d GiB", kb/1024/1024)
		}
	}
	return "unknown memory"
}

// render is the markdown report of r.
func (r *run) render() string {
	n, unrelated, baseline, phases := r.n, r.cfg.unrelated, r.baseline, r.phases
	var b strings.Builder
	fmt.Fprintf(&b, "### N = %d", n)
	if unrelated > 0 {
		fmt.Fprintf(&b, " (with %d unrelated Deployments)", unrelated)
	}
	if len(r.cfg.operatorArgs) > 0 {
		fmt.Fprintf(&b, ", operator flags `%s`", strings.Join(r.cfg.operatorArgs, " "))
	}
	if r.cfg.floorOnly {
		fmt.Fprintf(&b, "\n\nFloor only, no operator: a client creating %d Memcacheds and, for each, the operator's StatefulSet and Service: %s %s.\n", n, r.floor.create.Round(time.Millisecond), r.floor.stopped)
		renderStackCPU(&b, nil, r.floor, nil)
		b.WriteString("\n")
		return b.String()
	}
	if baseline > 0 {
		fmt.Fprintf(&b, "\n\nBaseline, no operator, %d StatefulSets and their Services created directly until Available: %s.\n", n, baseline.Round(time.Millisecond))
		fmt.Fprintf(&b, "Floor, no operator: a client creating %d Memcacheds and, for each, the operator's StatefulSet and Service, until rolled out: %s; "+
			"then scaling each to 2 (the Memcached, the StatefulSet, a PodDisruptionBudget): %s.\n\n",
			n, r.floor.create.Round(time.Millisecond), r.floor.scale.Round(time.Millisecond))
	} else {
		b.WriteString("\n\nNo baseline run.\n\n")
	}
	b.WriteString("| phase | wall time | vs baseline | vs floor | operator requests | per CR | reads (get, list) | writes | writes per CR | event writes | 409s | CPU s | peak RSS MiB |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range phases {
		total := p.total()
		ratio, vsFloor := "-", "-"
		if baseline > 0 && (p.name == "create" || strings.HasPrefix(p.name, "scale")) {
			ratio = fmt.Sprintf("%.2fx", p.wall.Seconds()/baseline.Seconds())
			f := r.floor.create
			if p.name != "create" {
				f = r.floor.scale
			}
			vsFloor = fmt.Sprintf("%.2fx", p.wall.Seconds()/f.Seconds())
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %.2f | %d | %d | %.2f | %d | %d | %.1f | %.0f |\n",
			p.name, p.wall.Round(time.Millisecond), ratio, vsFloor, total, float64(total)/float64(n), p.reads(), p.writes, float64(p.writes)/float64(n), p.events, p.conflict, p.cpu, float64(p.rss)/1024)
	}
	renderRequests(&b, phases)
	renderStackCPU(&b, r.baselineCPU, r.floor, phases)
	renderStages(&b, phases)
	b.WriteString("\n")
	return b.String()
}

// renderRequests tells the operator's requests of each phase by verb and
// resource, as the audit log has them.
func renderRequests(b *strings.Builder, phases []phase) {
	b.WriteString("\nOperator requests by verb and resource (audit log):\n\n| phase | requests |\n|---|---|\n")
	for _, p := range phases {
		keys := make([]string, 0, len(p.requests))
		for k := range p.requests {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s: %d", k, p.requests[k]))
		}
		if len(parts) == 0 {
			parts = []string{"none"}
		}
		fmt.Fprintf(b, "| %s | %s |\n", p.name, strings.Join(parts, ", "))
	}
}

// renderStackCPU tells the CPU seconds each process of the cluster spent in
// each phase, next to the operator's: on a machine whose cores they share,
// where the time of a phase went.
func renderStackCPU(b *strings.Builder, baselineCPU map[string]float64, fl floor, phases []phase) {
	var names []string
	stacks := []map[string]float64{baselineCPU, fl.createCPU, fl.scaleCPU}
	for _, p := range phases {
		stacks = append(stacks, p.stack)
	}
	for _, stack := range stacks {
		for name := range stack {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	b.WriteString("\nCPU seconds by process (`/proc/PID/stat`):\n\n| phase | " + strings.Join(names, " | ") + " | operator | all |\n|---|")
	b.WriteString(strings.Repeat("---|", len(names)+2) + "\n")
	row := func(name string, stack map[string]float64, operator float64, withOperator bool) {
		fmt.Fprintf(b, "| %s |", name)
		all := operator
		for _, n := range names {
			fmt.Fprintf(b, " %.1f |", stack[n])
			all += stack[n]
		}
		op := "-"
		if withOperator {
			op = fmt.Sprintf("%.1f", operator)
		}
		fmt.Fprintf(b, " %s | %.1f |\n", op, all)
	}
	if baselineCPU != nil {
		row("baseline", baselineCPU, 0, false)
	}
	if fl.createCPU != nil {
		row("floor: create", fl.createCPU, 0, false)
	}
	if fl.scaleCPU != nil {
		row("floor: scale to 2", fl.scaleCPU, 0, false)
	}
	for _, p := range phases {
		row(p.name, p.stack, p.cpu, true)
	}
}
