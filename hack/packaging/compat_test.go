package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/example/memcached-operator/internal/testsupport/repo"
)

// The chart and the bundle claim the oldest Kubernetes version that make
// test-compat runs the tests on, and no older one.
func TestMinKubeVersionIsTheOldestVersionTested(t *testing.T) {
	oldest, _, _ := strings.Cut(repo.Version("KUBE_COMPAT_VERSIONS"), ",")
	var major, minor, patch int
	if _, err := fmt.Sscanf(oldest, "v%d.%d.%d", &major, &minor, &patch); err != nil {
		t.Fatalf("KUBE_COMPAT_VERSIONS starts with %q: %v", oldest, err)
	}
	if want := fmt.Sprintf("%d.%d.0", major, minor); minKubeVersion != want {
		t.Errorf("the chart and the bundle claim Kubernetes %s, the oldest version tested is %s: claim %s", minKubeVersion, oldest, want)
	}
}
