// Package repo finds what the tests, the end-to-end suite and the benchmark
// take from the repository: its files, the versions in hack/versions.env,
// and the kubectl that hack/build-cluster.sh builds.
package repo

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Root is the repository's top folder.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Path is a path in the repository.
func Path(elem ...string) string {
	return filepath.Join(append([]string{Root()}, elem...)...)
}

var versions = sync.OnceValues(func() (map[string]string, error) {
	path := Path("hack", "versions.env")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	s := bufio.NewScanner(bytes.NewReader(raw))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: not KEY=VALUE: %q", path, line)
		}
		out[k] = v
	}
	return out, s.Err()
})

// Version is the value of key in hack/versions.env, the one place for the
// versions and image names that scripts and tests share. It panics when
// the key is missing: a test cannot run without it.
func Version(key string) string {
	vs, err := versions()
	if err != nil {
		panic(fmt.Sprintf("reading hack/versions.env: %v", err))
	}
	v, ok := vs[key]
	if !ok {
		panic(fmt.Sprintf("hack/versions.env has no %s", key))
	}
	return v
}

// Kubectl runs kubectl (bin/k8s/kubectl, else the one on PATH) on the
// cluster of kubeconfig, with stdin as its input, and returns its output;
// on failure the error holds the output.
func Kubectl(ctx context.Context, kubeconfig string, stdin []byte, args ...string) (string, error) {
	path := Path("bin", "k8s", "kubectl")
	if _, err := os.Stat(path); err != nil {
		path = "kubectl"
	}
	cmd := exec.CommandContext(ctx, path, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// KubeVersion is the Kubernetes version the tests run: $KUBE_VERSION when
// set (one of versions.env's KUBE_COMPAT_VERSIONS, as make test-compat sets
// it), else versions.env's KUBE_VERSION.
func KubeVersion() string {
	if v := os.Getenv("KUBE_VERSION"); v != "" {
		return v
	}
	return Version("KUBE_VERSION")
}

// KubeBinDir is where hack/build-cluster.sh puts the control plane of
// KubeVersion: bin/k8s for the default, bin/k8s/VERSION for another.
func KubeBinDir() string {
	if v := KubeVersion(); v != Version("KUBE_VERSION") {
		return Path("bin", "k8s", v)
	}
	return Path("bin", "k8s")
}

// NodeVersion is the Kubernetes version of the real node's kubelet: that
// of another KubeVersion (a kubelet may not be newer than its apiserver),
// else versions.env's NODE_VERSION.
func NodeVersion() string {
	if v := KubeVersion(); v != Version("KUBE_VERSION") {
		return v
	}
	return Version("NODE_VERSION")
}

// KubeMinor is the minor version of KubeVersion: 30 for v1.30.14.
func KubeMinor() int {
	var major, minor int
	if _, err := fmt.Sscanf(KubeVersion(), "v%d.%d", &major, &minor); err != nil {
		panic(fmt.Sprintf("KUBE_VERSION %q is not vMAJOR.MINOR.PATCH", KubeVersion()))
	}
	return minor
}
