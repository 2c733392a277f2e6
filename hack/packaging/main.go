// Command packaging writes the operator's Helm chart and its OLM bundle from
// the kustomize install bundle (manifests/default), the CRD and the samples,
// so that neither keeps a second, hand-kept copy of the RBAC, the Deployment
// or the CRD:
//
//	go run ./hack/packaging -version 0.1.0
//
// writes manifests/charts/memcached-operator and manifests/bundle. `make
// chart bundle` runs it, and `make verify` fails when what it writes differs
// from what is committed.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/blang/semver/v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/example/memcached-operator/internal/testsupport/repo"
)

func main() {
	var (
		version  = flag.String("version", "0.1.0", "Version of the chart and the bundle (semantic version, no leading v).")
		image    = flag.String("image", "", "Operator image the bundle's Deployment runs (default memcached-operator:<version>).")
		chartDir = flag.String("chart", repo.Path("manifests", "charts", "memcached-operator"), "Folder the Helm chart is written to (replaced).")
		olmDir   = flag.String("bundle", repo.Path("manifests", "bundle"), "Folder the OLM bundle is written to (replaced).")
		only     = flag.String("only", "", "Write only the chart or only the bundle (chart|bundle); both when empty.")
	)
	flag.Parse()
	if err := run(context.Background(), *version, *image, *chartDir, *olmDir, *only); err != nil {
		fmt.Fprintln(os.Stderr, "packaging:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, version, image, chartDir, olmDir, only string) error {
	v, err := semver.Parse(version)
	if err != nil {
		return fmt.Errorf("version %q: %w", version, err)
	}
	if image == "" {
		image = "memcached-operator:" + v.String()
	}
	in, err := loadInputs(ctx)
	if err != nil {
		return err
	}
	if only == "" || only == "chart" {
		files, err := chart(in, v)
		if err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		if err := writeTree(chartDir, files); err != nil {
			return err
		}
	}
	if only == "" || only == "bundle" {
		files, err := bundle(in, v, image)
		if err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
		if err := writeTree(olmDir, files); err != nil {
			return err
		}
	}
	return nil
}

// inputs is what both packages are made of.
type inputs struct {
	// install is manifests/default with the Prometheus component: every
	// object `kubectl apply -k` would install, and the ServiceMonitor.
	install []*unstructured.Unstructured
	// samples are the Memcacheds of manifests/samples.
	samples []*unstructured.Unstructured
}

func loadInputs(ctx context.Context) (inputs, error) {
	// An overlay of the default bundle with the Prometheus component, in a
	// folder of its own: the ServiceMonitor gets the bundle's name prefix
	// and namespace.
	dir, err := os.MkdirTemp("", "packaging-")
	if err != nil {
		return inputs{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	// kustomize takes relative paths only.
	def, err := filepath.Rel(dir, repo.Path("manifests", "default"))
	if err != nil {
		return inputs{}, err
	}
	prom, err := filepath.Rel(dir, repo.Path("manifests", "prometheus"))
	if err != nil {
		return inputs{}, err
	}
	takeover, err := filepath.Rel(dir, repo.Path("manifests", "takeover"))
	if err != nil {
		return inputs{}, err
	}
	overlay := fmt.Sprintf("resources:\n- %s\ncomponents:\n- %s\n- %s\n", def, prom, takeover)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		return inputs{}, err
	}
	install, err := kustomize(ctx, dir)
	if err != nil {
		return inputs{}, err
	}
	for _, o := range install {
		if err := asInDefault(o); err != nil {
			return inputs{}, err
		}
	}
	samples, err := kustomize(ctx, repo.Path("manifests", "samples"))
	if err != nil {
		return inputs{}, err
	}
	var memcacheds []*unstructured.Unstructured
	for _, s := range samples {
		if s.GetKind() == "Memcached" {
			memcacheds = append(memcacheds, s)
		}
	}
	return inputs{install: install, samples: memcacheds}, nil
}

// asInDefault gives o, an object of a component, manifests/default's name
// prefix and namespace, as it gets when the component is enabled there;
// the Deployment does not take over.
func asInDefault(o *unstructured.Unstructured) error {
	if !strings.HasPrefix(o.GetName(), namePrefix) && o.GetNamespace() == "system" {
		o.SetName(namePrefix + o.GetName())
		o.SetNamespace(installNamespace)
	}
	if k := o.GetKind(); (k == "ClusterRole" || k == "ClusterRoleBinding") && !strings.HasPrefix(o.GetName(), namePrefix) {
		// The takeover component's, cluster-scoped.
		o.SetName(namePrefix + o.GetName())
		if ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name"); ref != "" && !strings.HasPrefix(ref, namePrefix) {
			_ = unstructured.SetNestedField(o.Object, namePrefix+ref, "roleRef", "name")
		}
	}
	if o.GetKind() == "Deployment" {
		return withoutArg(o, takeOverArg)
	}
	return nil
}

// kustomize builds dir with the kubectl of bin/k8s.
func kustomize(ctx context.Context, dir string) ([]*unstructured.Unstructured, error) {
	kubectl := repo.Path("bin", "k8s", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		return nil, fmt.Errorf("%s is missing: run 'make k8s-binaries'", kubectl)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kubectl, "kustomize", "--load-restrictor=LoadRestrictionsNone", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s: %w: %s", dir, err, stderr.String())
	}
	return decode(out)
}

func decode(b []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// find returns the one object of kind whose name ends with suffix.
func find(objs []*unstructured.Unstructured, kind, suffix string) (*unstructured.Unstructured, error) {
	var found *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && strings.HasSuffix(o.GetName(), suffix) {
			if found != nil {
				return nil, fmt.Errorf("two %ss named *%s", kind, suffix)
			}
			found = o
		}
	}
	if found == nil {
		return nil, fmt.Errorf("no %s named *%s in manifests/default", kind, suffix)
	}
	return found, nil
}

// writeTree replaces dir with files (paths relative to dir).
func writeTree(dir string, files map[string][]byte) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// takeOverArg is the manager's flag that the takeover component adds: the
// chart sets it from its values, the bundle never (OLM's Subscription
// config sets TAKE_OVER instead).
const takeOverArg = "--take-over"

// withoutArg removes arg from the manager container's arguments of d.
func withoutArg(d *unstructured.Unstructured, arg string) error {
	containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if err != nil || len(containers) == 0 {
		return fmt.Errorf("the manager Deployment has no containers: %v", err)
	}
	c := containers[0].(map[string]any)
	args, _, err := unstructured.NestedStringSlice(c, "args")
	if err != nil {
		return err
	}
	kept := args[:0]
	for _, a := range args {
		if a != arg {
			kept = append(kept, a)
		}
	}
	if err := unstructured.SetNestedStringSlice(c, kept, "args"); err != nil {
		return err
	}
	return unstructured.SetNestedSlice(d.Object, containers, "spec", "template", "spec", "containers")
}
