// Command bench measures what the operator costs the apiserver, on a fresh
// local cluster: requests and writes per Memcached, conflicts, time to
// converge, and the operator's CPU and memory, from the apiserver's audit
// log of the operator's own user (not from the operator's bookkeeping).
// It exits non-zero when a run breaks a hard promise: a conflict (409) in
// any phase, or any request while nothing changes.
//
//	go run ./hack/bench -n 100,1000 [-unrelated 0] [-profile] [-timeout 0] [-out docs/benchmarks.md]
//
// The files: run.go drives one run (its phases and their measurement),
// workload.go what the phases do to the cluster, operator.go the operator
// process, audit.go the audit log, stages.go where each Memcached's time
// to converge goes, report.go the markdown report.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/pkg/golimit"
)

// config is what the flags ask for.
type config struct {
	sizes     []int // numbers of Memcacheds, one run each
	unrelated int   // unrelated Deployments created before the operator starts
	profile   bool  // CPU and heap profiles of the operator into bin/bench/
	out       string
	steady    time.Duration // length of the steady-state window
	// syncPeriod is the operator's --sync-period: resyncs happen during the
	// steady window.
	syncPeriod   time.Duration
	operatorArgs []string
	skipBaseline bool
	createOnly   bool
	// floorOnly: measure the floor's create (no baseline, no operator),
	// within timeout: whether the stack itself converges at this N.
	floorOnly bool
	// timeout bounds the wait for a phase to converge; 0: 300 ms per
	// Memcached, at least 10 minutes.
	timeout time.Duration
	// goMemLimit is the Go memory limit the operator runs with (0: none).
	goMemLimit int64
	// operator is the operator's binary (bin/manager when empty): another
	// build, such as an earlier commit's, is measured the same way.
	operator string
	// monitoring: every Memcached has monitoring on, and the cluster the
	// ServiceMonitor CRD, so each gets a ServiceMonitor too.
	monitoring bool
}

func parseFlags() (config, string, error) {
	var c config
	sizes := flag.String("n", "100,1000", "comma-separated numbers of Memcacheds")
	flag.IntVar(&c.unrelated, "unrelated", 0, "unrelated Deployments created before the operator starts (to show the cache holds only its own)")
	flag.BoolVar(&c.profile, "profile", false, "write CPU and heap profiles of the operator to bin/bench/")
	flag.StringVar(&c.out, "out", "", "also write the report to this markdown file")
	flag.DurationVar(&c.steady, "steady", 30*time.Second, "length of the steady-state window")
	flag.DurationVar(&c.syncPeriod, "sync-period", 10*time.Second, "the operator's --sync-period (resyncs happen during the steady window)")
	opArgs := flag.String("operator-args", "", "extra flags for the operator, space-separated (e.g. --kube-api-qps=200)")
	flag.BoolVar(&c.skipBaseline, "skip-baseline", false, "skip the no-operator baseline")
	flag.StringVar(&c.operator, "operator", "", "the operator's binary (default bin/manager), e.g. one built from an earlier commit to compare with")
	flag.BoolVar(&c.monitoring, "monitoring", false, "Memcacheds with monitoring on, in a cluster with the ServiceMonitor CRD (one more object each)")
	flag.BoolVar(&c.createOnly, "create-only", false, "stop after the create phase (for large N: memory and create cost)")
	flag.BoolVar(&c.floorOnly, "floor-only", false, "measure only the floor's create, within -timeout, without the operator (for large N: whether the stack itself converges)")
	memLimit := flag.Bool("container-memory-limit", true, fmt.Sprintf("run the operator with the Go memory limit its container gets: GOMEMLIMIT at %.0f%% of the manager's memory limit in manifests/manager", golimit.Ratio*100))
	flag.DurationVar(&c.timeout, "timeout", 0, "how long a phase may take to converge (default: 300 ms per Memcached, at least 10 minutes)")
	flag.Parse()

	c.operatorArgs = strings.Fields(*opArgs)
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return c, "", fmt.Errorf("bad -n value %q", s)
		}
		c.sizes = append(c.sizes, n)
	}
	if !*memLimit {
		return c, "The operator runs without a Go memory limit.\n\n", nil
	}
	limit, err := containerMemoryLimit()
	if err != nil {
		return c, "", err
	}
	c.goMemLimit = golimit.Of(limit)
	return c, fmt.Sprintf("The operator runs with GOMEMLIMIT=%d MiB, as in its container (%.0f%% of the manager's %d MiB limit).\n\n",
		c.goMemLimit>>20, golimit.Ratio*100, limit>>20), nil
}

func main() {
	cfg, memNote, err := parseFlags()
	if err != nil {
		fail(err)
	}
	ctrllog.SetLogger(logr.Discard()) // the bench's client logs nothing worth reading

	var report strings.Builder
	fmt.Fprintf(&report, "Machine: %d cores, %s; command: `go run ./hack/bench %s`; date %s.\n\n",
		runtime.NumCPU(), memTotal(), strings.Join(os.Args[1:], " "), time.Now().UTC().Format("2006-01-02"))
	report.WriteString(memNote)
	for _, n := range cfg.sizes {
		r, err := runOnce(cfg, n)
		report.WriteString(r)
		if err != nil {
			// What was measured before the failure is still worth reading.
			fmt.Print(report.String())
			fail(err)
		}
	}
	fmt.Print(report.String())
	if cfg.out != "" {
		if err := repo.WriteGenerated(cfg.out, "hack/bench", report.String()); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}
