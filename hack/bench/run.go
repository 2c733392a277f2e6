package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/localcluster"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/pkg/operator"
)

const (
	operatorNamespace = "memcached-bench"
	operatorSA        = "memcached-operator"
	operatorUser      = "system:serviceaccount:" + operatorNamespace + ":" + operatorSA
	// benchNamespace holds the Memcacheds of the measured phases.
	benchNamespace = "bench"
	// steadyPhase names the phase in which nothing changes.
	steadyPhase = "steady"
)

// scheme is the operator's: the built-in types and ours.
var scheme = func() *k8sruntime.Scheme {
	s, err := operator.NewScheme()
	if err != nil {
		panic(err)
	}
	return s
}()

// run is one run of the bench: N Memcacheds on a fresh cluster.
type run struct {
	cfg      config
	n        int
	names    []string // the Memcacheds' names
	cluster  *localcluster.Cluster
	rest     *rest.Config
	c        client.Client
	auditLog string
	procs    processes
	op       *operatorProcess
	// watch reads the bench namespace from watches.
	watch client.Reader
	// track follows each Memcached through the stages of a phase.
	track *tracker

	baseline    time.Duration
	baselineCPU map[string]float64
	floor       floor
	phases      []phase
}

// runOnce measures the operator with n Memcacheds on a cluster of its own,
// and returns the report of what it measured, also when it stopped early.
func runOnce(cfg config, n int) (string, error) {
	r := &run{cfg: cfg, n: n, names: names("cache", n), track: newTracker()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := r.execute(ctx)
	if r.cluster != nil {
		if derr := r.cluster.Delete(context.Background()); derr != nil {
			fmt.Fprintln(os.Stderr, "bench: deleting the cluster:", derr)
		}
	}
	return r.render(), err
}

// execute sets the stage, then measures each phase in turn.
func (r *run) execute(ctx context.Context) error {
	if r.cfg.floorOnly {
		return r.floorOnly(ctx)
	}
	if err := r.setUp(ctx); err != nil {
		return err
	}
	defer r.op.stop()

	phases := []struct {
		name string
		act  func(context.Context) error
	}{
		{"create", r.create},
		{fmt.Sprintf("%s (%s)", steadyPhase, r.cfg.steady), r.idle},
		{"scale to 2", r.scale},
		{"delete", r.delete},
	}
	if r.cfg.createOnly {
		phases = phases[:1]
	}
	heapTaken := false
	heap := func() {
		if r.cfg.profile && !heapTaken {
			r.op.heapProfile(filepath.Join(repo.Root(), "bin", "bench", fmt.Sprintf("heap-%d.pprof", r.n)))
			heapTaken = true
		}
	}
	defer heap() // when a phase failed, or after the last one kept
	for _, p := range phases {
		if p.name == "delete" {
			heap() // the heap with every object cached
		}
		stopProfile := func() {}
		if r.cfg.profile && p.name == "create" {
			stopProfile = r.op.cpuProfile(filepath.Join(repo.Root(), "bin", "bench", fmt.Sprintf("cpu-%d.pprof", r.n)))
		}
		err := r.measure(ctx, p.name, p.act)
		if err != nil {
			return err
		}
		stopProfile()
	}
	return r.promisesKept()
}

// startCluster creates the run's local cluster, its client and the CRDs.
func (r *run) startCluster(ctx context.Context, o localcluster.Options) error {
	fmt.Fprintf(os.Stderr, "== N=%d: creating a local cluster\n", r.n)
	var err error
	if r.cluster, err = localcluster.Create(ctx, fmt.Sprintf("bench-%d", r.n), o); err != nil {
		return err
	}
	if r.procs, err = r.cluster.PIDs(); err != nil {
		return err
	}
	if r.rest, err = r.cluster.Config(); err != nil {
		return err
	}
	if r.c, err = client.New(r.rest, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	return r.installCRDs(ctx)
}

// floorOnly measures the floor's create alone, on a cluster of its own,
// within the phase timeout.
func (r *run) floorOnly(ctx context.Context) error {
	if err := r.startCluster(ctx, localcluster.Options{FakeNodes: 4}); err != nil {
		return err
	}
	var err error
	fmt.Fprintf(os.Stderr, "== N=%d: floor only, %d Memcacheds with their StatefulSets and Services made by the client itself, within %s\n", r.n, r.n, r.convergeTimeout())
	r.floor, err = runFloor(ctx, r.rest, r.c, r.n, r.procs, true, r.convergeTimeout())
	fmt.Fprintf(os.Stderr, "   create %s %s\n", r.floor.create.Round(time.Millisecond), r.floor.stopped)
	return err
}

// setUp creates the cluster, runs the baseline, installs the CRD and the
// operator's user, and starts the operator.
func (r *run) setUp(ctx context.Context) error {
	if err := r.startCluster(ctx, localcluster.Options{AuditUser: operatorUser, FakeNodes: 4}); err != nil {
		return err
	}
	var err error
	if r.auditLog, err = r.cluster.AuditLog(ctx); err != nil {
		return err
	}
	if !r.cfg.skipBaseline {
		fmt.Fprintf(os.Stderr, "== N=%d: baseline, %d StatefulSets and Services without the operator\n", r.n, r.n)
		if r.baseline, r.baselineCPU, err = runBaseline(ctx, r.rest, r.c, r.n, r.procs); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "   %s\n", r.baseline.Round(time.Millisecond))
		fmt.Fprintf(os.Stderr, "== N=%d: floor, %d Memcacheds with their StatefulSets and Services made and scaled by the client itself\n", r.n, r.n)
		if r.floor, err = runFloor(ctx, r.rest, r.c, r.n, r.procs, false, r.convergeTimeout()); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "   create %s, scale %s\n", r.floor.create.Round(time.Millisecond), r.floor.scale.Round(time.Millisecond))
	}
	if err := setUpOperatorUser(ctx, r.c); err != nil {
		return err
	}
	if r.cfg.unrelated > 0 {
		fmt.Fprintf(os.Stderr, "== N=%d: %d unrelated Deployments\n", r.n, r.cfg.unrelated)
		if err := createUnrelated(ctx, r.c, r.cfg.unrelated); err != nil {
			return err
		}
	}
	if err := r.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}); err != nil {
		return err
	}
	watch, err := watchNamespace(ctx, r.rest, benchNamespace)
	if err != nil {
		return err
	}
	r.watch = watch
	if err := r.track.follow(ctx, watch); err != nil {
		return err
	}
	// The Memcached informer starts on the first list: before the clock does.
	if err := r.watch.List(ctx, &cachev1alpha1.MemcachedList{}, client.InNamespace(benchNamespace)); err != nil {
		return err
	}

	// The operator last: execute stops it.
	sa, err := r.cluster.ServiceAccountKubeconfig(ctx, operatorNamespace, operatorSA)
	if err != nil {
		return err
	}
	saKubeconfig := filepath.Join(r.cluster.StateDir, "operator.kubeconfig")
	if err := os.WriteFile(saKubeconfig, sa, 0o600); err != nil {
		return err
	}
	r.op, err = startOperator(r.cfg, saKubeconfig)
	return err
}

// installCRDs installs the Memcached CRD, and the ServiceMonitor CRD with
// -monitoring, and waits until they are served.
func (r *run) installCRDs(ctx context.Context) error {
	crds := []string{"apply", "--server-side", "-f", repo.Path("manifests", "crd", "bases")}
	if r.cfg.monitoring {
		crds = append(crds, "-f", repo.Path("hack", "crds"))
	}
	if out, err := repo.Kubectl(ctx, r.cluster.Kubeconfig, nil, crds...); err != nil {
		return fmt.Errorf("installing the CRDs: %w: %s", err, out)
	}
	if err := repo.WaitForCRDs(ctx, r.cluster.Kubeconfig, "crd", "--all"); err != nil {
		return fmt.Errorf("waiting for the CRDs: %w", err)
	}
	return nil
}

// measure runs one phase and records what it cost: wall time, the
// operator's requests from the audit log, CPU and memory.
func (r *run) measure(ctx context.Context, name string, act func(context.Context) error) error {
	fmt.Fprintf(os.Stderr, "== N=%d: %s\n", r.n, name)
	off := fileSize(r.auditLog)
	cpu0, stack0 := r.op.cpuSeconds(), r.procs.cpu()
	in0, err := scrapeInternals(r.op.Process)
	if err != nil {
		return fmt.Errorf("reading the operator's metrics: %w", err)
	}
	start := time.Now()
	actErr := act(ctx)
	p := phase{name: name, wall: time.Since(start), cpu: r.op.cpuSeconds() - cpu0, rss: r.op.peakRSS(), stack: since(r.procs.cpu(), stack0)}
	if in, err := scrapeInternals(r.op.Process); err == nil {
		p.internals = in.minus(in0)
	}
	if name == "create" || strings.HasPrefix(name, "scale") {
		p.stages = r.track.stages()
	}
	if actErr != nil {
		// What it cost until it stopped is still worth reading.
		p.name += " (stopped early)"
	}
	time.Sleep(500 * time.Millisecond) // let the last audit lines land
	if err := countAudit(r.auditLog, off, &p); err != nil {
		return err
	}
	r.phases = append(r.phases, p)
	if actErr != nil {
		return fmt.Errorf("%s: %w (operator peak RSS so far %d MiB, CPU %.1f s)", name, actErr, p.rss/1024, p.cpu)
	}
	fmt.Fprintf(os.Stderr, "   %s: %s, %d writes, %d events, %d 409s, CPU %.1f s, peak RSS %d MiB\n",
		name, p.wall.Round(time.Millisecond), p.writes, p.events, p.conflict, p.cpu, p.rss/1024)
	return nil
}
