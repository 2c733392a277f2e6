package desired_test

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/example/memcached-operator/internal/testsupport/golden"
	"github.com/example/memcached-operator/internal/testsupport/repo"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestRenderedObjectsMatchTheGoldenFiles")

// An upgrade of the operator rolls a cache's pods when what it renders for
// the same Memcached changes: the rendered Deployment, Service, budget,
// ServiceMonitor and NetworkPolicy of each spec above are kept in
// testdata/golden, and this test fails when the builders render anything
// else. A change to the
// builders therefore lands with its golden files (go test ./pkg/desired
// -run TestRenderedObjectsMatchTheGoldenFiles -update), where a reviewer
// sees what it does to every cache, and docs/install.md's upgrade notes
// say which versions roll pods.
func TestRenderedObjectsMatchTheGoldenFiles(t *testing.T) {
	for name := range golden.Specs() {
		t.Run(name, func(t *testing.T) {
			got, err := golden.Render(golden.Memcached(name))
			if err != nil {
				t.Fatal(err)
			}
			path := repo.Path(golden.Path(name))
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./pkg/desired -run TestRenderedObjectsMatchTheGoldenFiles -update writes it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("the objects rendered for spec %q differ from %s: an upgrade to this build changes them (and rolls the pods when the Deployment's template changed). If that is meant, rewrite the golden files with -update in the same commit and say so in docs/install.md's upgrade notes.\n%s",
					name, path, cmp.Diff(string(want), string(got)))
			}
		})
	}
}
