//go:build integration

package owned_test

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/testsupport/fuzzspec"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Run(m, &env) }

// FuzzRecordedObjectAppliesNothing is the property of the rule that makes
// a converged Memcached cost no request, on objects the apiserver really
// recorded: for every Memcached the apiserver admits (fuzzspec.Input), each
// object built from it, applied as the operator's field manager
// (server-side dry run) and summarized from the apiserver's answer as the
// operator's store summarizes it, compares as "applies nothing" with the
// same object built again, and as owning exactly its fields. `make fuzz`
// explores further, as for the builders' target in pkg/desired.
func FuzzRecordedObjectAppliesNothing(f *testing.F) {
	fuzzspec.Fuzz(f, func(t *testing.T, in fuzzspec.Input) {
		m := in.Memcached(fuzzNamespace())
		ctx := context.Background()
		if err := env.Client.Create(ctx, m.DeepCopy(), client.DryRunAll); err != nil {
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Fatalf("creating Memcached %q: %v", m.Name, err)
			}
			return // not admitted: the operator never builds its objects
		}
		m.UID = "00000000-0000-0000-0000-000000000001"
		if desired.RunsExporter(m) && !schemas().ServiceMonitors() {
			t.Fatal("the test apiserver serves no ServiceMonitors")
		}
		again := fuzzspec.Objects(m, testenv.Images, fuzzspec.Digests)
		for kind, a := range dryRunClients().DryRunApply(ctx, m, testenv.Images, fuzzspec.Digests) {
			if a.Err != nil {
				t.Fatalf("admitted Memcached %q %+v gives a %s the apiserver refuses: %v", m.Name, m.Spec, kind, a.Err)
			}
			s, err := owned.Summarize(a.Object, schemas())
			if err != nil {
				t.Fatalf("summarizing %s: %v", kind, err)
			}
			if nothing, err := s.AppliesNothing(again[kind]); err != nil || !nothing {
				t.Fatalf("admitted Memcached %q %+v: the %s the apiserver recorded does not compare as applying nothing (err %v): a converged Memcached would be applied on every reconcile", m.Name, m.Spec, kind, err)
			}
			if exactly, err := s.OwnsExactly(again[kind], schemas()); err != nil || !exactly {
				t.Fatalf("admitted Memcached %q %+v: the operator does not own exactly the fields of its %s (err %v): every reconcile would read it to name a drift", m.Name, m.Spec, kind, err)
			}
		}
	})
}

var fuzzNamespace = sync.OnceValue(func() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fuzz-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		panic(err)
	}
	return ns.Name
})

// schemas are read from the apiserver, as the operator reads them when it
// starts.
var schemas = sync.OnceValue(func() *owned.Schemas {
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		panic(err)
	}
	s, err := owned.LearnSchemas(context.Background(), env.Config, hc)
	if err != nil {
		panic(err)
	}
	return s
})

// dryRunClients send the dry-run applies of the built objects.
var dryRunClients = sync.OnceValue(func() *fuzzspec.Clients {
	c, err := fuzzspec.NewClients(env.Config)
	if err != nil {
		panic(err)
	}
	return c
})
