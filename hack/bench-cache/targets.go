package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/hostoperator"
	"github.com/example/memcached-operator/internal/testsupport/localcluster"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/internal/testsupport/testcerts"
	"github.com/example/memcached-operator/pkg/desired"
)

const namespace = "bench-cache"

// env is the run's cluster, its clients and the operator.
type env struct {
	cfg     config
	cluster *localcluster.Cluster
	c       client.Client
	// dns is the cluster's DNS server, on the real node.
	dns      string
	operator *hostoperator.Process
	started  time.Time
}

// target is one thing the workload is driven against.
type target struct {
	name string
	// spec is the Memcached's spec; nil: memcached on the host.
	spec *cachev1alpha1.MemcachedSpec
	// access is how the client reaches it.
	access access
	// scrape: the exporter is scraped while the load runs, as Prometheus
	// would at the ServiceMonitor's interval.
	scrape bool
}

// measured is a target's result.
type measured struct {
	target
	result
	host    bool
	scrapes int
	// cgroup is the CPU cgroup memcached on the host ran in, if any.
	cgroup string
}

// run measures what cfg asks for and returns the report. Its error is
// the run's failure, or, once it ran, the goals it checked and missed.
func run(ctx context.Context, cfg config) (string, error) {
	e := &env{cfg: cfg, started: time.Now()}
	if err := e.setUp(ctx); err != nil {
		return "", err
	}
	defer e.tearDown()
	if cfg.autoscale {
		return e.autoscaling(ctx)
	}
	var rows []measured
	var ops []operation
	var err error
	if !cfg.skipTarget {
		rows, err = e.throughput(ctx)
	}
	if err == nil && !cfg.skipOps {
		ops, err = e.operations(ctx)
	}
	var mem *memoryMeasure
	if err == nil && cfg.memory {
		mem, err = e.memory(ctx)
	}
	if err == nil {
		var missed []string
		for _, g := range unmet(goalsOf(rows, ops), cfg.short) {
			missed = append(missed, fmt.Sprintf("%s (%s)", g.name, g.measure))
		}
		if len(missed) > 0 {
			err = fmt.Errorf("goals not met: %s", strings.Join(missed, "; "))
		}
	}
	report := render(e, rows, ops)
	if mem != nil {
		report += "\n" + renderMemory(mem)
	}
	return report, err
}

// setUp creates a local cluster whose only node is the real node, the
// CRD, the namespace, and runs the operator on this machine with the
// images the node has (it pulls nothing).
func (e *env) setUp(ctx context.Context) error {
	fmt.Fprintln(os.Stderr, "== creating a local cluster with the real node")
	var err error
	if e.cluster, err = localcluster.Create(ctx, "bench-cache", localcluster.Options{RealNode: true}); err != nil {
		return err
	}
	rc, err := e.cluster.Config()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = cachev1alpha1.AddToScheme(scheme)
	if e.c, err = client.New(rc, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if out, err := repo.Kubectl(ctx, e.cluster.Kubeconfig, nil, "apply", "--server-side", "-f", repo.Path("manifests", "crd", "bases")); err != nil {
		return fmt.Errorf("installing the CRD: %w: %s", err, out)
	}
	if err := repo.WaitForCRDs(ctx, e.cluster.Kubeconfig, "crd", "--all"); err != nil {
		return fmt.Errorf("waiting for the CRD: %w", err)
	}
	if err := e.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	if e.dns, err = realNodeIP(ctx, e.c); err != nil {
		return err
	}
	return e.startOperator(ctx)
}

// startOperator runs bin/manager as the cluster's admin.
func (e *env) startOperator(context.Context) error {
	var err error
	args := []string{"--memcached-image", repo.Version("LOCAL_MEMCACHED_IMAGE"),
		"--exporter-image", repo.Version("LOCAL_EXPORTER_IMAGE"), "--zap-log-level=error"}
	if !e.cfg.noReloader {
		args = append(args, "--reloader-image", repo.Version("LOCAL_OPERATOR_IMAGE"))
	}
	e.operator, err = hostoperator.Start(hostoperator.Options{Kubeconfig: e.cluster.Kubeconfig, Args: args})
	return err
}

func (e *env) tearDown() {
	if e.operator != nil {
		_ = e.operator.Stop()
	}
	if e.cluster != nil {
		if err := e.cluster.Delete(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "bench-cache: deleting the cluster:", err)
		}
	}
}

// throughput drives the workload against each target in turn: memcached
// on the host first and last (so that a drift of the machine over the
// run shows), the Memcacheds between.
func (e *env) throughput(ctx context.Context) ([]measured, error) {
	ca, pair, err := testcerts.ForService(namespace, "tls")
	if err != nil {
		return nil, err
	}
	if err := e.c.Create(ctx, ca.Secret(namespace, "tls-cert", pair)); err != nil {
		return nil, err
	}
	tlsAccess := access{tls: &tls.Config{RootCAs: ca.Pool(), ServerName: testcerts.ServiceHosts(namespace, "tls")[0], MinVersion: tls.VersionTLS12}}
	targets := []target{
		{name: "(a) memcached on the host"},
		{name: "(b) Memcached, size 1, defaults", spec: &cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}},
		{name: "(b) with a CPU request of 500m (Burstable instead of BestEffort)", spec: &cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1),
			Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}},
		{name: "(b) with 2 threads (one per core) instead of memcached's 4", spec: &cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), Threads: ptr.To[int32](2)}},
		{name: "(c) with the exporter", spec: &cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1),
			Monitoring: &cachev1alpha1.MonitoringSpec{Enabled: true}}, scrape: true},
		{name: "(d) with TLS", spec: &cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1),
			TLS: &cachev1alpha1.TLSSpec{SecretName: "tls-cert"}}, access: tlsAccess},
		{name: "(e) size 3, through the discovery endpoint", spec: &cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)}},
		{name: "(a) memcached on the host, again"},
	}
	if e.cfg.short {
		// The limit and the default pod: what the goals compare.
		targets = []target{targets[0], targets[1], targets[len(targets)-1]}
	}
	var rows []measured
	for _, t := range targets {
		fmt.Fprintf(os.Stderr, "== %s\n", t.name)
		m, err := e.measure(ctx, t)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", t.name, err)
		}
		fmt.Fprintf(os.Stderr, "   %.0f ops/s, p50 %s, p99 %s, %d errors; CPU per op: client %.1f µs, memcached %.1f µs\n",
			m.opsPerSecond(), m.percentile(50), m.percentile(99), m.errors, m.cpuPerOp(m.clientCPU), m.cpuPerOp(m.memcachedCPU))
		rows = append(rows, m)
	}
	return rows, nil
}

// measure sets t up, stores the key space, drives the workload, and tears
// t down again.
func (e *env) measure(ctx context.Context, t target) (measured, error) {
	m := measured{target: t}
	r, err := newRing()
	if err != nil {
		return m, err
	}
	if t.spec == nil {
		h, err := startHostMemcached(ctx)
		if err != nil {
			return m, err
		}
		defer h.stop()
		m.host, m.cgroup = true, h.cgroup
		if err := r.set([]string{h.addr}); err != nil {
			return m, err
		}
	} else {
		name := "tls"
		if t.spec.TLS == nil {
			name = "cache"
		}
		mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: *t.spec}
		if err := e.c.Create(ctx, mc); err != nil {
			return m, err
		}
		defer func() {
			if err := deleteAndWait(context.Background(), e.c, mc); err != nil {
				fmt.Fprintln(os.Stderr, "bench-cache: deleting", name+":", err)
			}
		}()
		dctx, stop := context.WithCancel(ctx)
		defer stop()
		if err := discover(dctx, e.c, client.ObjectKeyFromObject(mc), e.dns, t.access, r); err != nil {
			return m, err
		}
		if err := converged(ctx, e.c, client.ObjectKeyFromObject(mc), *t.spec.Size, r); err != nil {
			return m, fmt.Errorf("waiting for %s: %w", name, err)
		}
	}
	c := newClient(r, t.access, e.cfg.load.concurrency)
	defer c.Close()
	if err := store(ctx, c, e.cfg.load, 0); err != nil {
		return m, err
	}
	var scrapes chan int
	sctx, stopScraping := context.WithCancel(ctx)
	if t.scrape {
		scrapes = make(chan int, 1)
		go func() { scrapes <- scrape(sctx, r.list()) }()
	}
	m.result = drive(ctx, c, e.cfg.load)
	stopScraping()
	if scrapes != nil {
		m.scrapes = <-scrapes
		if m.scrapes == 0 {
			return m, errors.New("the exporter was never scraped")
		}
	}
	return m, ctx.Err()
}

// scrapeInterval is how often the exporter is scraped during a window:
// a busy Prometheus' interval, shorter than the ServiceMonitor's default.
const scrapeInterval = 5 * time.Second

// scrape reads the metrics of the exporters beside servers every
// scrapeInterval until ctx ends, and counts the scrapes that succeeded.
func scrape(ctx context.Context, servers []string) int {
	n := 0
	for {
		for _, s := range servers {
			host, _, _ := net.SplitHostPort(s)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, strconv.Itoa(int(desired.MetricsPort)))+"/metrics", nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					n++
				}
			}
		}
		select {
		case <-ctx.Done():
			return n
		case <-time.After(scrapeInterval):
		}
	}
}
