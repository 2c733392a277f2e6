//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/example/memcached-operator/internal/testsupport/hostoperator"
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
		// A failed test can then say what the operator's goroutines were
		// doing (describeOutage).
		Pprof: true,
		// Production's resync (every 10 hours): none within the suite, so
		// what the operator does, it does from watch events and timed
		// requeues alone.
		Args: append([]string{"--memcached-image=" + desired.DefaultImage, "--exporter-image=" + exporterImage(),
			// The reloader runs from the operator image, which the suite builds for the real node.
			"--reloader-image=" + operatorImage,
			// spec.autoscaling's readings every 5 s, not 30: its story
			// waits out windows of readings.
			"--autoscale-interval=5s"}, extraArgs...),
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
	err := o.Scrape(func(name, labels string, v float64) {
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
