//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/internal/testsupport/olm"
	"github.com/example/memcached-operator/internal/testsupport/repo"
)

// scorecardTests are the tests of the bundle's scorecard config
// (manifests/bundle/tests/scorecard/config.yaml): its basic and OLM suites.
var scorecardTests = []string{
	"basic-check-spec", "olm-bundle-validation", "olm-crds-have-validation",
	"olm-crds-have-resources", "olm-spec-descriptors", "olm-status-descriptors",
}

// operator-sdk scorecard (make scorecard: the version hack/tools/scorecard
// pins, its test image built here and imported into the real node) passes
// every test of the bundle's config on manifests/bundle, its pods run on
// the real node; and fails on a copy of the bundle whose CSV lost its spec
// descriptors, the olm-spec-descriptors test naming what is missing.
func TestTheBundlePassesTheScorecard(t *testing.T) {
	t.Parallel()
	f := features.New("the OLM bundle passes operator-sdk scorecard").WithLabel("needs", "containers").
		Assess("every test of the bundle's config passes", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("the scorecard's pods reach the real node through the local cluster's admission plugins")
			}
			g := NewWithT(t)
			start := time.Now()
			builtBeside(t, "scorecard")
			t.Logf("waited %s for the scorecard's builds", time.Since(start).Round(time.Second))
			out, err := scorecard(ctx, cfg, repo.Path("manifests", "bundle"))
			g.Expect(err).NotTo(HaveOccurred(), out)
			for _, test := range scorecardTests {
				g.Expect(out).To(MatchRegexp(`(?m)^Entrypoint: \[scorecard-test %s\]\n\tState: pass$`, regexp.QuoteMeta(test)), out)
			}
			g.Expect(out).To(ContainSubstring("every scorecard test passed"))
			return ctx
		}).
		Assess("a CSV without its spec descriptors fails", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("the scorecard's pods reach the real node through the local cluster's admission plugins")
			}
			g := NewWithT(t)
			broken := t.TempDir()
			g.Expect(os.CopyFS(broken, os.DirFS(repo.Path("manifests", "bundle")))).To(Succeed())
			csv, err := olm.ReadCSV()
			g.Expect(err).NotTo(HaveOccurred())
			for i := range csv.Spec.CustomResourceDefinitions.Owned {
				csv.Spec.CustomResourceDefinitions.Owned[i].SpecDescriptors = nil
			}
			raw, err := yaml.Marshal(csv)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(os.WriteFile(filepath.Join(broken, "manifests", "memcached-operator.clusterserviceversion.yaml"), raw, 0o644)).To(Succeed())
			out, err := scorecard(ctx, cfg, broken)
			g.Expect(err).To(HaveOccurred(), out)
			g.Expect(out).To(MatchRegexp(`(?m)^Entrypoint: \[scorecard-test olm-spec-descriptors\]\n\tState: fail$`), out)
			g.Expect(out).To(ContainSubstring("size does not have a spec descriptor"))
			g.Expect(out).To(MatchRegexp(`(?m)^Entrypoint: \[scorecard-test basic-check-spec\]\n\tState: pass$`), "the other tests still pass")
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// scorecard runs hack/scorecard.sh on the bundle folder dir against the
// suite's cluster and returns what it printed.
func scorecard(ctx context.Context, cfg *envconf.Config, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, repo.Path("hack", "scorecard.sh"), dir)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cfg.KubeconfigFile())
	out, err := cmd.CombinedOutput()
	return string(out), err
}
