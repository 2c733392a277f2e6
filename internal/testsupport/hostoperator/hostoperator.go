// Package hostoperator runs the operator's binary (bin/manager) as a
// process of this machine, as the end-to-end suite and the benchmark do.
package hostoperator

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/example/memcached-operator/internal/testsupport/repo"
)

// Options say how to run the operator.
type Options struct {
	// Binary is the operator's binary; bin/manager when empty.
	Binary string
	// Kubeconfig is the cluster and user it runs as.
	Kubeconfig string
	// Metrics serves the metrics endpoint over plain HTTP on a free local
	// address; without it the endpoint is off.
	Metrics bool
	// Pprof serves the pprof endpoints on a free local address.
	Pprof bool
	// Args are more flags, after those Start sets (a later flag wins).
	Args []string
	// Env is added to this process's environment.
	Env []string
	// Output receives the operator's stdout and stderr; when nil, they go
	// to a temporary file (LogPath).
	Output io.Writer
}

// Process is the operator running on this machine.
type Process struct {
	cmd *exec.Cmd
	// MetricsAddr, ProbeAddr and PprofAddr are host:port of its endpoints
	// (empty when off).
	MetricsAddr, ProbeAddr, PprofAddr string
	// LogPath is the file with its output, when Options.Output was nil.
	LogPath string

	exited  chan struct{}
	exitErr error
}

// FreeAddr is a local TCP address free when it is returned.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Start runs the operator and waits, at most a minute, until it reports
// ready.
func Start(o Options) (*Process, error) {
	bin := o.Binary
	if bin == "" {
		bin = repo.Path("bin", "manager")
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("operator binary %s: %w (run 'make build')", bin, err)
	}
	p := &Process{exited: make(chan struct{})}
	var err error
	if p.ProbeAddr, err = FreeAddr(); err != nil {
		return nil, err
	}
	metrics := "0"
	if o.Metrics {
		if p.MetricsAddr, err = FreeAddr(); err != nil {
			return nil, err
		}
		metrics = p.MetricsAddr
	}
	args := []string{"--kubeconfig", o.Kubeconfig, "--metrics-bind-address", metrics, "--metrics-secure=false",
		"--health-probe-bind-address", p.ProbeAddr}
	if o.Pprof {
		if p.PprofAddr, err = FreeAddr(); err != nil {
			return nil, err
		}
		args = append(args, "--pprof-bind-address", p.PprofAddr)
	}
	p.cmd = exec.Command(bin, append(args, o.Args...)...)
	p.cmd.Env = append(os.Environ(), o.Env...)
	out := o.Output
	if out == nil {
		f, err := os.CreateTemp("", "memcached-operator-*.log")
		if err != nil {
			return nil, err
		}
		defer f.Close() // the child holds its own descriptor
		p.LogPath, out = f.Name(), f
	}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the operator: %w", err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	if !p.WaitReady(time.Minute) {
		p.Kill()
		return nil, fmt.Errorf("the operator did not become ready within a minute%s", p.seeLog())
	}
	return p, nil
}

func (p *Process) seeLog() string {
	if p.LogPath == "" {
		return ""
	}
	return "; see " + p.LogPath
}

// Pid is the operator's process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the operator's process has ended (and was
// reaped: a zombie counts as ended).
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// WaitReady waits at most timeout until the operator answers /readyz with
// 200, and, when it serves metrics, /metrics too (the manager starts its
// metrics server after its probes: ready is not yet scrapable); false when
// it did not, or exited.
func (p *Process) WaitReady(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	urls := []string{"http://" + p.ProbeAddr + "/readyz"}
	if p.MetricsAddr != "" {
		urls = append(urls, "http://"+p.MetricsAddr+"/metrics")
	}
	for time.Now().Before(deadline) && !p.Exited() {
		if answers(urls[0]) && (len(urls) == 1 || answers(urls[1])) {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

// answers tells whether a GET of url is answered 200.
func answers(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Stop sends SIGTERM and waits at most 30 s for the operator to exit; an
// exit other than a clean one is an error.
func (p *Process) Stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.exitErr != nil {
			return fmt.Errorf("the operator exited with %w%s", p.exitErr, p.seeLog())
		}
		return nil
	case <-time.After(30 * time.Second):
		p.Kill()
		return errors.New("the operator did not stop within 30s of SIGTERM")
	}
}

// Kill sends SIGKILL, which gives the operator no chance to clean up, and
// waits until it has ended.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// MetricSum sums the samples of a metric whose labels contain every one of want.
func (p *Process) MetricSum(metric string, want ...string) (float64, error) {
	var sum float64
	err := p.Scrape(func(name, labels string, v float64) {
		if name != metric {
			return
		}
		for _, w := range want {
			if !strings.Contains(labels, w) {
				return
			}
		}
		sum += v
	})
	return sum, err
}

// Scrape reads the operator's metrics endpoint, calling f for every sample.
func (p *Process) Scrape(f func(name, labels string, v float64)) error {
	resp, err := http.Get("http://" + p.MetricsAddr + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		name, labels := line[:sp], ""
		if b := strings.IndexByte(name, '{'); b >= 0 {
			name, labels = line[:b], line[b:sp]
		}
		f(name, labels, v)
	}
	return s.Err()
}
