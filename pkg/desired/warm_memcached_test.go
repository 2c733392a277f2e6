//go:build integration

package desired_test

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/memcachedproc"
	"github.com/example/memcached-operator/pkg/desired"
)

// TestWarmOnlyWhereMemcachedTakesAMemoryFile runs the real memcached with
// the operator's command line and a memory file, over the memory limits
// and item sizes the CRD admits around WarmMinimumMiB: the pods run
// memcached warm exactly where memcached starts with a memory file (below,
// it refuses to start, and the pods run it as before).
func TestWarmOnlyWhereMemcachedTakesAMemoryFile(t *testing.T) {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		t.Fatalf("memcached is not installed (make node-packages installs it, as make test does): %v", err)
	}
	images := desired.Images{Memcached: "memcached", Exporter: "exporter", Reloader: "operator"}
	tests := []struct {
		mem         int32 // 0: memcached's default, 64
		maxItemSize string
	}{
		{8, ""}, {16, "1Mi"}, {38, ""}, {38, "4Mi"}, {39, ""}, {39, "512Ki"}, {39, "16Mi"}, {40, "2Mi"}, {0, ""}, {0, "32Mi"}, {256, "128Mi"},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(int(tt.mem))+"/"+tt.maxItemSize, func(t *testing.T) {
			m := &cachev1alpha1.Memcached{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "warm"},
				Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), MaxItemSize: tt.maxItemSize},
			}
			if tt.mem != 0 {
				m.Spec.MemoryLimitMiB = ptr.To(tt.mem)
			}
			dir := memcachedproc.WritableDir(t)
			args := append(desired.Command(m)[1:], "--memory-file="+filepath.Join(dir, "memory"))
			starts, out := memcachedStarts(t, bin, args)
			if warm := desired.RunsWarm(m, images); warm != starts {
				t.Errorf("RunsWarm: %v; memcached starts with a memory file: %v (%s)", warm, starts, out)
			}
		})
	}
}
