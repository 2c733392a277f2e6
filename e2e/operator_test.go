//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/example/memcached-operator/internal/hostoperator"
	"github.com/example/memcached-operator/pkg/desired"
)

// hostOperator is the operator (bin/manager, or $E2E_OPERATOR_BINARY)
// running as a process on this machine, with its metrics served over HTTP.
type hostOperator struct {
	*hostoperator.Process
}

func startHostOperator(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	op, err := runOperator(cfg)
	if err != nil {
		return ctx, err
	}
	operator = op
	return ctx, nil
}

// runOperator starts the operator on the test cluster with extra flags,
// and waits until it is ready.
func runOperator(cfg *envconf.Config, extraArgs ...string) (*hostOperator, error) {
	p, err := hostoperator.Start(hostoperator.Options{
		Binary:     os.Getenv("E2E_OPERATOR_BINARY"),
		Kubeconfig: cfg.KubeconfigFile(),
		Metrics:    true,
		Args:       append([]string{"--sync-period=5s", "--memcached-image=" + desired.DefaultImage, "--exporter-image=" + exporterImage()}, extraArgs...),
	})
	if err != nil {
		return nil, err
	}
	fmt.Printf("operator running as pid %d, log in %s\n", p.Pid(), p.LogPath)
	return &hostOperator{p}, nil
}

func stopHostOperator(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	if operator == nil {
		return ctx, nil
	}
	return ctx, operator.Stop()
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
	resp, err := http.Get("http://" + o.MetricsAddr + "/metrics")
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
