// Command bench-cache measures the cache as its clients see it, on the
// local cluster's real node: a real memcached client library
// (gomemcache, with a consistent-hash selector) drives a fixed get/set
// mix against memcached run directly on this machine (the limit) and
// against Memcacheds the operator runs, one after the other in one run;
// then it counts the keys a client keeps, and the errors it sees, through
// what the operator does to the pods (scaling, rollouts, Secret
// rotations, its own upgrade).
//
//	go run ./hack/bench-cache [-duration 20s] [-concurrency 16] [-out docs/benchmarks-cache.md]
//	go run ./hack/bench-cache -short   # make test: the goals that are not figures of speed
//
// It exits non-zero when a goal it reports is not met (in a short run,
// the goals of speed excepted).
//
// The files: targets.go what is measured and how it is set up, load.go
// the client's workload, ring.go the consistent-hash selector,
// cluster.go following the pods, operations.go the hit ratio through
// operations, report.go the markdown report.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/example/memcached-operator/internal/testsupport/repo"
)

type config struct {
	load workload
	// opKeys are the keys stored before each operation and read after it.
	opKeys int
	// keysPerSecond, when set, is the operations' Memcached's
	// spec.keyMoves.keysPerSecond.
	keysPerSecond int
	out           string
	skipOps       bool
	noReloader    bool
	skipTarget    bool
	// memory: measure a pod's memory at a full cache.
	memory bool
	// autoscale: the autoscaling run only (autoscale.go).
	autoscale bool
	// only: the operations whose name contains one of these, if any.
	only []string
	// short: a quick run that checks the goals that are not figures of
	// speed (make test runs it): a short window, fewer keys, the
	// operations that are not the e2e suite's.
	short bool
}

func main() {
	var c config
	flag.IntVar(&c.load.concurrency, "concurrency", 16, "client goroutines")
	flag.IntVar(&c.load.keys, "keys", 10000, "keys in the throughput runs' key space (all stored before measuring)")
	flag.IntVar(&c.load.valueSize, "value-size", 1024, "bytes per value")
	flag.Float64Var(&c.load.getRatio, "get-ratio", 0.9, "share of gets in the mix; the rest are sets")
	flag.DurationVar(&c.load.warmUp, "warm-up", 3*time.Second, "unmeasured load before each window")
	flag.DurationVar(&c.load.duration, "duration", 20*time.Second, "measured window per target")
	flag.IntVar(&c.opKeys, "op-keys", 30000, "keys stored before each operation and read after it")
	flag.IntVar(&c.keysPerSecond, "keys-per-second", 0, "the operations' Memcached's spec.keyMoves.keysPerSecond (0: unset, the mover's default)")
	flag.StringVar(&c.out, "out", "", "also write the report to this markdown file (its generated part)")
	flag.BoolVar(&c.skipOps, "skip-operations", false, "measure throughput only")
	flag.BoolVar(&c.noReloader, "no-reloader", false, "run the operator without a reloader image (pods with TLS or authentication run no reloader and roll on new Secret content), to measure what the reloader costs")
	flag.BoolVar(&c.skipTarget, "skip-throughput", false, "measure the operations only")
	flag.BoolVar(&c.memory, "memory", false, "also measure a pod's memory (its cgroups on the real node) at a full cache, and after memcached restarted in place")
	flag.BoolVar(&c.short, "short", false, "a quick run (2s windows, 3,000 keys, the limit and the default pod, the operations but the Secret rotations, which the e2e suite covers) that fails on a client-visible error or a key lost where the pods stayed as they were; figures of speed are reported, not checked")
	flag.BoolVar(&c.autoscale, "autoscale", false, "run the autoscaling comparison only (about 16 minutes; with -short, 9): spec.autoscaling, a size right for the peak and an HPA on CPU under a working set that grows threefold and back; the plot goes to docs/benchmarks-autoscale.svg")
	flag.Func("operations", "only the operations whose name contains this text (repeatable), each on the Memcached as the ones before it left it", func(v string) error {
		c.only = append(c.only, v)
		return nil
	})
	flag.Parse()
	if c.short {
		c.load.warmUp, c.load.duration, c.load.keys, c.opKeys = time.Second, 2*time.Second, 3000, 3000
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	report, err := run(ctx, c)
	if report != "" {
		fmt.Println(report)
		if c.out != "" {
			if werr := repo.WriteGenerated(c.out, "hack/bench-cache", report); werr != nil {
				fmt.Fprintln(os.Stderr, "bench-cache:", werr)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-cache:", err)
		os.Exit(1)
	}
}
