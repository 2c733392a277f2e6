//go:build integration

package desired_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/endpoint"
	"github.com/example/memcached-operator/pkg/desired"
)

// TestMaxItemSizeRulesMatchMemcached runs the real memcached (Debian's, as
// the real node's image has it) with the command line the operator gives
// it, over the boundary values of maxItemSize and memoryLimitMiB, and
// checks that admission accepts exactly the specs memcached starts with.
func TestMaxItemSizeRulesMatchMemcached(t *testing.T) {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		t.Fatalf("memcached is not installed (make node-packages installs it, as make test does): %v", err)
	}
	tests := []struct {
		maxItemSize string
		mem         int32 // 0: memcached's default, 64
	}{
		{"512Ki", 0}, {"1Mi", 0}, {"1536Ki", 0}, {"32Mi", 0}, {"33Mi", 0}, {"32768Ki", 0}, {"33280Ki", 0},
		{"4Mi", 8}, {"4608Ki", 8}, {"5Mi", 8},
		{"1Gi", 8192}, {"1049088Ki", 8192}, {"2Gi", 8192},
		{"100Ki", 0}, {"1000Ki", 0}, {"1500Ki", 0}, {"1023Ki", 0},
	}
	ctx := context.Background()
	for i, tt := range tests {
		t.Run(tt.maxItemSize+"/"+strconv.Itoa(int(tt.mem)), func(t *testing.T) {
			g := NewWithT(t)
			m := &cachev1alpha1.Memcached{
				ObjectMeta: metav1.ObjectMeta{Namespace: fuzzNamespace(), Name: "item-size-" + strconv.Itoa(i)},
				Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), MaxItemSize: tt.maxItemSize},
			}
			if tt.mem != 0 {
				m.Spec.MemoryLimitMiB = ptr.To(tt.mem)
			}
			err := env.Client.Create(ctx, m.DeepCopy(), client.DryRunAll)
			admitted := err == nil
			if err != nil && !strings.Contains(err.Error(), "maxItemSize") {
				t.Fatalf("refused for another reason than maxItemSize: %v", err)
			}
			starts, out := memcachedStarts(t, bin, desired.Command(m)[1:])
			g.Expect(admitted).To(Equal(starts), "admitted: %v (%v); memcached starts: %v (%s)", admitted, err, starts, out)
		})
	}
}

// memcachedStarts runs memcached with args (its port replaced by a free
// one, on loopback) until it either exits, refusing them, or accepts a
// connection; it returns which, and what memcached printed.
func memcachedStarts(t *testing.T, bin string, args []string) (bool, string) {
	t.Helper()
	addr := endpoint.Free(t)
	_, port, _ := net.SplitHostPort(addr)
	args = append(args, "--listen=127.0.0.1", "--port="+port, "--udp-port=0")
	if os.Geteuid() == 0 {
		args = append(args, "--user=nobody")
	}
	var out strings.Builder
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	for {
		select {
		case err := <-exited:
			exited <- err // for the deferred wait
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("running memcached %v: %v", args, err)
			}
			return false, out.String()
		case <-time.After(20 * time.Millisecond):
			if c, err := net.Dial("tcp", addr); err == nil {
				_ = c.Close()
				return true, out.String()
			}
		}
	}
}
