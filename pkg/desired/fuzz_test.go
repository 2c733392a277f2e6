//go:build integration

package desired_test

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/fuzzspec"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Run(m, &env) }

var fuzzNamespace = sync.OnceValue(func() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fuzz-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		panic(err)
	}
	return ns.Name
})

// FuzzAdmittedSpecGivesAcceptedDeployment feeds the desired-state builders
// Memcacheds of every shape (fuzzspec.Input): they never panic, and for
// every Memcached the apiserver admits, the apiserver also accepts the
// Deployment, Service, PodDisruptionBudget, ServiceMonitor and
// NetworkPolicy built from it (server-side dry run, as the operator's
// field manager). Besides the operator's own settings, it generates the
// fields the operator passes
// through to the pods: the CRD must refuse what the apiserver would refuse
// there. The seeds and testdata/fuzz/ run with every integration `go
// test`; `make fuzz` explores further. Its workers share the kube-apiserver
// that the coordinating process started (see testenv.SharedKubeconfig),
// and it bounds minimization by executions: every execution is a round
// trip to the apiserver, so go test's default of 60 s per new input stalls
// the run. What the apiserver answers is compared with the operator's rule
// by pkg/owned's FuzzRecordedObjectAppliesNothing.
func FuzzAdmittedSpecGivesAcceptedDeployment(f *testing.F) {
	fuzzspec.Fuzz(f, func(t *testing.T, in fuzzspec.Input) { checkSpec(t, in.Memcached(fuzzNamespace())) })
}

// TestFuzzSeedsAreAdmittedAsMeant: the seeds meant to reach the builders
// are admitted, and those meant to be refused are refused, so that a seed
// the CRD starts refusing does not silently stop testing the builders.
func TestFuzzSeedsAreAdmittedAsMeant(t *testing.T) {
	for _, sd := range fuzzspec.Seeds {
		t.Run(sd.In.Name, func(t *testing.T) {
			if admitted := checkSpec(t, sd.In.Memcached(fuzzNamespace())); admitted != sd.Admitted {
				t.Errorf("seed %q: admitted %v, meant %v", sd.In.Name, admitted, sd.Admitted)
			}
		})
	}
}

// checkSpec checks one Memcached: the builders never panic, and when the
// apiserver admits it, each object built from it is accepted. It returns
// whether the Memcached was admitted; any answer to its creation but
// admission or a validation refusal fails the test, so that no input
// passes unchecked.
func checkSpec(t *testing.T, m *cachev1alpha1.Memcached) bool {
	t.Helper()
	name := m.Name
	// Never panics, admitted or not.
	fuzzspec.Objects(m, testenv.Images, fuzzspec.Digests)

	ctx := context.Background()
	if err := env.Client.Create(ctx, m.DeepCopy(), client.DryRunAll); err != nil {
		if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
			t.Fatalf("creating Memcached %q: %v", name, err)
		}
		return false // not admitted: the builder is never asked about it
	}
	m.UID = "00000000-0000-0000-0000-000000000001"
	for kind, a := range dryRunClients().DryRunApply(ctx, m, testenv.Images, fuzzspec.Digests) {
		if a.Err != nil {
			t.Fatalf("admitted Memcached %q %+v gives a %s the apiserver refuses: %v", name, m.Spec, kind, a.Err)
		}
	}
	return true
}

// dryRunClients send the dry-run applies of the built objects.
var dryRunClients = sync.OnceValue(func() *fuzzspec.Clients {
	c, err := fuzzspec.NewClients(env.Config)
	if err != nil {
		panic(err)
	}
	return c
})
