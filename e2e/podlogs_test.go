//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
)

// keepLogOnFailure follows the log of the container of the pod
// namespace/name until the pod ends, and prints it if t fails: a pod
// evicted or deleted takes its log with it, and the hand-off it did is
// said only there.
func keepLogOnFailure(t *testing.T, cfg *envconf.Config, namespace, name, container string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
	if err != nil {
		t.Logf("cannot follow the log of pod %s: %v", name, err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		stream, err := cs.CoreV1().Pods(namespace).GetLogs(name, &corev1.PodLogOptions{Container: container, Follow: true}).Stream(ctx)
		if err != nil {
			mu.Lock()
			buf.WriteString("(cannot follow the log: " + err.Error() + ")\n")
			mu.Unlock()
			return
		}
		defer stream.Close()
		b := make([]byte, 32<<10)
		for {
			n, err := stream.Read(b)
			mu.Lock()
			buf.Write(b[:n])
			mu.Unlock()
			if err != nil {
				if err != io.EOF && ctx.Err() == nil {
					mu.Lock()
					buf.WriteString("(the log ended: " + err.Error() + ")\n")
					mu.Unlock()
				}
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("the log of pod %s's %s container:\n%s", name, container, buf.String())
		}
	})
}
