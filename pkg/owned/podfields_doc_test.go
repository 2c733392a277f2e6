package owned

import (
	"os"
	"strings"
	"testing"

	"github.com/example/memcached-operator/internal/testsupport/repo"
)

// docs/architecture.md's table of the pod's fields has a row for each of
// PodFields, in its order: the page says what the code does.
func TestTheArchitecturePageListsEveryPodField(t *testing.T) {
	b, err := os.ReadFile(repo.Path("docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	at := 0
	for _, f := range PodFields {
		i := strings.Index(page[at:], "\n| "+f.Name+" |")
		if i < 0 {
			t.Fatalf("docs/architecture.md has no row for %q after the previous field's", f.Name)
		}
		at += i + 1
	}
}
