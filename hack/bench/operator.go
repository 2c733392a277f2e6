package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/example/memcached-operator/internal/testsupport/hostoperator"
	"github.com/example/memcached-operator/internal/testsupport/proc"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/desired"
)

// operatorProcess is the operator under measurement.
type operatorProcess struct {
	*hostoperator.Process
}

// startOperator runs the operator's binary (bin/manager by default) as the user of kubeconfig, with the Go
// memory limit of cfg, and waits until it is ready.
func startOperator(cfg config, kubeconfig string) (*operatorProcess, error) {
	o := hostoperator.Options{
		Binary:     cfg.operator,
		Kubeconfig: kubeconfig,
		Pprof:      cfg.profile,
		Metrics:    true, // the bench reads the operator's queue and reconcile times
		// As it ships: the pods run the reloader, the discovery endpoint
		// and the warm runner from the operator's image, and the operator
		// tells them of a new membership (pod patches the bench counts).
		Args: append([]string{"--sync-period", cfg.syncPeriod.String(), "--memcached-image", desired.DefaultImage,
			"--reloader-image", testenv.ReloaderImage, "--zap-log-level=error"},
			cfg.operatorArgs...),
		Output: os.Stderr,
	}
	if cfg.goMemLimit > 0 {
		// What the operator sets in its container from the cgroup's limit;
		// the bench's host process has no cgroup limit of its own.
		o.Env = []string{fmt.Sprintf("GOMEMLIMIT=%d", cfg.goMemLimit)}
	}
	if cfg.profile {
		if err := os.MkdirAll(repo.Path("bin", "bench"), 0o755); err != nil {
			return nil, err
		}
	}
	p, err := hostoperator.Start(o)
	if err != nil {
		return nil, err
	}
	return &operatorProcess{p}, nil
}

func (o *operatorProcess) stop() {
	if err := o.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
}

// containerMemoryLimit is the memory limit of the manager container in
// manifests/manager/manager.yaml, in bytes.
func containerMemoryLimit() (int64, error) {
	path := repo.Path("manifests", "manager", "manager.yaml")
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	dec := k8syaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); err != nil {
			if err == io.EOF {
				return 0, fmt.Errorf("%s: no manager container with a memory limit", path)
			}
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && c.Name == "manager" {
				return q.Value(), nil
			}
		}
	}
}

// cpuSeconds is the operator's user and system CPU time so far.
func (o *operatorProcess) cpuSeconds() float64 { return proc.CPUSeconds(o.Pid()) }

// rss is the operator's resident set size now, in KiB (VmRSS).
func (o *operatorProcess) rss() int64 { return o.status("VmRSS:") }

// peakRSS is the operator's peak resident set size in KiB (VmHWM).
func (o *operatorProcess) peakRSS() int64 { return o.status("VmHWM:") }

// status reads a size in KiB from the operator's /proc status.
func (o *operatorProcess) status(field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", o.Pid()))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field) {
			kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return kb
		}
	}
	return 0
}

// cpuProfile starts a 120 s CPU profile; the returned func waits for it.
func (o *operatorProcess) cpuProfile(path string) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fetch("http://"+o.PprofAddr+"/debug/pprof/profile?seconds=120", path)
	}()
	return func() { <-done }
}

// heapProfile writes a heap profile taken right after a collection, so that
// in-use figures are the live heap.
func (o *operatorProcess) heapProfile(path string) {
	fetch("http://"+o.PprofAddr+"/debug/pprof/heap?gc=1", path)
}

func fetch(url, path string) {
	resp, err := http.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	defer resp.Body.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
	fmt.Fprintln(os.Stderr, "wrote", path)
}

// processes are the processes of the local cluster, by name (etcd,
// kube-apiserver, ...).
type processes map[string]int

// cpu is each process's user and system CPU time so far.
func (ps processes) cpu() map[string]float64 {
	out := map[string]float64{}
	for name, pid := range ps {
		out[name] = proc.CPUSeconds(pid)
	}
	return out
}

// since is the CPU time spent by each process between two readings.
func since(now, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for name, v := range now {
		out[name] = v - before[name]
	}
	return out
}
