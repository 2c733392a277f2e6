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
)

// hostOperator is the operator (bin/manager) running as a process on this machine.
type hostOperator struct {
	cmd         *exec.Cmd
	metricsAddr string
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
	bin := os.Getenv("E2E_OPERATOR_BINARY")
	if bin == "" {
		bin = filepath.Join(repoRoot(), "bin", "manager")
	}
	if _, err := os.Stat(bin); err != nil {
		return ctx, fmt.Errorf("operator binary %s: %w (run 'make build')", bin, err)
	}
	metrics, err := freeAddr()
	if err != nil {
		return ctx, err
	}
	probes, err := freeAddr()
	if err != nil {
		return ctx, err
	}
	log, err := os.CreateTemp("", "memcached-e2e-operator-*.log")
	if err != nil {
		return ctx, err
	}
	cmd := exec.Command(bin,
		"--kubeconfig", cfg.KubeconfigFile(),
		"--metrics-bind-address", metrics, "--metrics-secure=false",
		"--health-probe-bind-address", probes,
		"--sync-period=5s",
		"--memcached-image=memcached:1.6.26-alpine3.19",
	)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return ctx, fmt.Errorf("starting the operator: %w", err)
	}
	operator = &hostOperator{cmd: cmd, metricsAddr: metrics, log: log}
	fmt.Printf("operator running as pid %d, log in %s\n", cmd.Process.Pid, log.Name())

	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + probes + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return ctx, nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return ctx, fmt.Errorf("the operator did not become ready; see %s", log.Name())
}

func stopHostOperator(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	if operator == nil {
		return ctx, nil
	}
	_ = operator.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- operator.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return ctx, fmt.Errorf("the operator exited with %w; see %s", err, operator.log.Name())
		}
	case <-time.After(30 * time.Second):
		_ = operator.cmd.Process.Kill()
		return ctx, fmt.Errorf("the operator did not stop within 30s of SIGTERM")
	}
	return ctx, nil
}

// clientRequests returns the operator's client-go request counts by HTTP
// status code, from its metrics (rest_client_requests_total).
func (o *hostOperator) clientRequests() (map[int]int, error) {
	resp, err := http.Get("http://" + o.metricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	counts := map[int]int{}
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		i := strings.Index(line, `code="`)
		if i < 0 {
			continue
		}
		code, err := strconv.Atoi(line[i+6 : i+9])
		if err != nil {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return nil, err
		}
		counts[code] += int(v)
	}
	return counts, s.Err()
}
