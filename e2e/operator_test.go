//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/example/memcached-operator/pkg/desired"
)

// hostOperator is the operator (bin/manager) running as a process on this machine.
type hostOperator struct {
	cmd         *exec.Cmd
	metricsAddr string
	probeAddr   string
	log         *os.File
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func startHostOperator(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	op, err := runOperator(cfg)
	if err != nil {
		return ctx, err
	}
	operator = op
	return ctx, nil
}

// runOperator starts bin/manager (or $E2E_OPERATOR_BINARY) on the test
// cluster with extra flags, and waits until it is ready.
func runOperator(cfg *envconf.Config, extraArgs ...string) (*hostOperator, error) {
	bin := os.Getenv("E2E_OPERATOR_BINARY")
	if bin == "" {
		bin = filepath.Join(repoRoot(), "bin", "manager")
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("operator binary %s: %w (run 'make build')", bin, err)
	}
	metrics, err := freeAddr()
	if err != nil {
		return nil, err
	}
	probes, err := freeAddr()
	if err != nil {
		return nil, err
	}
	log, err := os.CreateTemp("", "memcached-e2e-operator-*.log")
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubeconfig", cfg.KubeconfigFile(),
		"--metrics-bind-address", metrics, "--metrics-secure=false",
		"--health-probe-bind-address", probes,
		"--sync-period=5s",
		"--memcached-image=" + desired.DefaultImage,
	}, extraArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the operator: %w", err)
	}
	op := &hostOperator{cmd: cmd, metricsAddr: metrics, probeAddr: probes, log: log}
	fmt.Printf("operator running as pid %d, log in %s\n", cmd.Process.Pid, log.Name())
	if !op.waitHealthy(time.Minute) {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("the operator did not become healthy; see %s", log.Name())
	}
	return op, nil
}

// waitHealthy waits until the operator answers its health check.
func (o *hostOperator) waitHealthy(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + o.probeAddr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

func stopHostOperator(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	if operator == nil {
		return ctx, nil
	}
	return ctx, operator.stop()
}

// stop sends SIGTERM and waits for a clean exit.
func (o *hostOperator) stop() error {
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- o.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("the operator exited with %w; see %s", err, o.log.Name())
		}
	case <-time.After(30 * time.Second):
		_ = o.cmd.Process.Kill()
		return fmt.Errorf("the operator did not stop within 30s of SIGTERM")
	}
	return nil
}

// kill sends SIGKILL: the operator gets no chance to clean up.
func (o *hostOperator) kill() {
	_ = o.cmd.Process.Kill()
	_ = o.cmd.Wait()
}

// clientRequests returns the operator's client-go request counts by HTTP
// status code, from its metrics (rest_client_requests_total).
func (o *hostOperator) clientRequests() (map[int]int, error) {
	counts := map[int]int{}
	err := o.scrape(func(name, labels string, v float64) {
		if name != "rest_client_requests_total" {
			return
		}
		if i := strings.Index(labels, `code="`); i >= 0 {
			if code, err := strconv.Atoi(labels[i+6 : i+9]); err == nil {
				counts[code] += int(v)
			}
		}
	})
	return counts, err
}

// metricSum sums the samples of a metric whose labels contain every one of want.
func (o *hostOperator) metricSum(metric string, want ...string) (float64, error) {
	var sum float64
	err := o.scrape(func(name, labels string, v float64) {
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

// scrape reads the operator's metrics endpoint, calling f for every sample.
func (o *hostOperator) scrape(f func(name, labels string, v float64)) error {
	resp, err := http.Get("http://" + o.metricsAddr + "/metrics")
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
