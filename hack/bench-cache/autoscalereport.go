package main

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/testsupport/repo"
)

// scaledEvents are the notes of the Scaled events of the Memcached name,
// and of its KeysMoved events (what each step's move copied), in order,
// each with its time.
func scaledEvents(ctx context.Context, c client.Client, name string) []string {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return []string{"events not read: " + err.Error()}
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp) })
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name && (e.Reason == "Scaled" && strings.HasPrefix(e.Note, "Autoscaling") || e.Reason == "KeysMoved") {
			out = append(out, e.CreationTimestamp.UTC().Format("15:04:05")+" "+e.Note)
		}
	}
	return out
}

// phaseOf is the phase a point falls in.
func phaseOf(ps []phase, at time.Duration) int {
	end := time.Duration(0)
	for i, p := range ps {
		end += p.for_
		if at <= end {
			return i
		}
	}
	return len(ps) - 1
}

// summary is a run's hit ratio per phase and overall, the size at the
// end of each phase, and the changes of size its points show.
func summary(s *scaled, ps []phase) (ratios []float64, whole float64, sizes []int32, changes []string) {
	gets, hits := make([]int, len(ps)), make([]int, len(ps))
	sizes = make([]int32, len(ps))
	var g, h int
	last := int32(0)
	for _, p := range s.series {
		i := phaseOf(ps, p.at)
		gets[i] += p.gets
		hits[i] += p.hits
		g, h = g+p.gets, h+p.hits
		sizes[i] = p.size
		if last != 0 && p.size != last {
			changes = append(changes, fmt.Sprintf("%d→%d at %s", last, p.size, p.at.Round(bucket)))
		}
		last = p.size
	}
	for i := range ps {
		ratios = append(ratios, hitRatio(hits[i], gets[i]))
	}
	return ratios, hitRatio(h, g), sizes, changes
}

func hitRatio(hits, gets int) float64 {
	if gets == 0 {
		return 0
	}
	return float64(hits) / float64(gets)
}

// renderAutoscaling is the report of the autoscaling run.
func renderAutoscaling(all []*scaled, ps []phase, hpa *cpuHPA) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Run of %s (%s, %d CPUs)\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.NumCPU())
	fmt.Fprintf(&b, "Three Memcacheds at once on the real node (kubelet %s, memcached %s), slots of %d MiB, `keyMoves` with `clientPollSeconds: 2`; each with a client of its own on this machine (gomemcache, libmemcached's ketama, following its discovery endpoint every second) reading %d keys a second from %d goroutines, cache-aside (a miss sets the key, 1 KiB), key k read in proportion to 1/(%d+k)^%.2f over the working set. Phases: ",
		repo.NodeVersion(), repo.Version("LOCAL_MEMCACHED_IMAGE"), slotMiB, zipfGetsPerSecond, zipfWorkers, zipfV, zipfS)
	var names []string
	for _, p := range ps {
		names = append(names, fmt.Sprintf("%s (%d keys, %s)", p.name, p.keys, p.for_))
	}
	b.WriteString(strings.Join(names, ", then ") + ". The operator reads the pods every 30 s (its default).\n\n")
	b.WriteString("| run | hit ratio: " + strings.Join(phaseNames(ps), " | ") + " | whole run | slots at each phase's end | changes of size |\n|---|")
	b.WriteString(strings.Repeat("---|", len(ps)+3) + "\n")
	for _, s := range all {
		ratios, whole, sizes, changes := summary(s, ps)
		fmt.Fprintf(&b, "| %s |", s.label)
		for _, r := range ratios {
			fmt.Fprintf(&b, " %.1f%% |", 100*r)
		}
		fmt.Fprintf(&b, " %.1f%% | %s | %s |\n", 100*whole, joinSizes(sizes), orNone(changes))
	}
	fmt.Fprintf(&b, "\nThe HPA on CPU read the pods' CPU %d times: %.0f%% of the request at the peak, %.0f%% on average (target 80%%); it changed the size %d times.\n\n",
		hpa.readings, 100*hpa.peak, 100*hpa.sum/float64(max(hpa.readings, 1)), hpa.steps)
	fmt.Fprintf(&b, "Of the %d held keys each client wrote once at the start and read back every %s (outside the load's keys), read back at the end of the run: %s.\n\n", heldCount, heldEvery, heldAtEnd(all))
	b.WriteString("`spec.autoscaling`'s steps (its `Scaled` events, and the `KeysMoved` event of each step's move):\n\n")
	for _, e := range all[0].steps {
		fmt.Fprintf(&b, "- %s\n", e)
	}
	if said := all[0].said; len(said) > 0 {
		fmt.Fprintf(&b, "\nAt the end of the run its status said: %s.\n", said[len(said)-1].what)
	}
	fmt.Fprintf(&b, "\nIts `status.autoscaling` through the run (each change seen at a %s bucket's end; it is rewritten when the decision's cause changes, not its readings):\n\n", bucket)
	for _, w := range all[0].said {
		fmt.Fprintf(&b, "- %s: %s\n", w.at.Round(time.Second), w.what)
	}
	b.WriteString("\n" + renderStepCosts(stepCosts(all[0].series)))
	b.WriteString("![hit ratio and size over time](benchmarks-autoscale.svg)\n")
	return b.String()
}

func phaseNames(ps []phase) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.name)
	}
	return out
}

func joinSizes(sizes []int32) string {
	var out []string
	for _, s := range sizes {
		out = append(out, fmt.Sprint(s))
	}
	return strings.Join(out, ", ")
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "; ")
}

// heldAtEnd is, for each run, how many held keys read back at its last
// reading.
func heldAtEnd(all []*scaled) string {
	var out []string
	for _, s := range all {
		n := -1
		for _, p := range s.series {
			if p.held >= 0 {
				n = p.held
			}
		}
		out = append(out, fmt.Sprintf("%s %s", heldRead(n), s.label))
	}
	return strings.Join(out, "; ")
}
