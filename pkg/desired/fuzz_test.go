//go:build integration

package desired_test

import (
	"context"
	"sync"
	"testing"

	monitoringclient "github.com/prometheus-operator/prometheus-operator/pkg/client/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/fuzzspec"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
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
// Deployment, Service, PodDisruptionBudget and ServiceMonitor built from
// it (server-side dry run, as the operator's field manager). Besides the
// operator's own settings, it generates the fields the operator passes
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
	desired.Deployment(m, images, fuzzspec.Digests)
	desired.Service(m)
	desired.PodDisruptionBudget(m)
	if desired.Monitored(m) {
		desired.ServiceMonitor(m)
	}

	ctx := context.Background()
	if err := env.Client.Create(ctx, m.DeepCopy(), client.DryRunAll); err != nil {
		if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
			t.Fatalf("creating Memcached %q: %v", name, err)
		}
		return false // not admitted: the builder is never asked about it
	}
	m.UID = "00000000-0000-0000-0000-000000000001"
	build := map[string]func() error{
		"Deployment": func() error {
			_, err := clientset().AppsV1().Deployments(m.Namespace).Apply(ctx, desired.Deployment(m, images, fuzzspec.Digests), dryRun)
			return err
		},
		"Service": func() error {
			_, err := clientset().CoreV1().Services(m.Namespace).Apply(ctx, desired.Service(m), dryRun)
			return err
		},
		"PodDisruptionBudget": func() error {
			_, err := clientset().PolicyV1().PodDisruptionBudgets(m.Namespace).Apply(ctx, desired.PodDisruptionBudget(m), dryRun)
			return err
		},
	}
	if desired.Monitored(m) {
		build["ServiceMonitor"] = func() error {
			_, err := monitoringClientset().MonitoringV1().ServiceMonitors(m.Namespace).Apply(ctx, desired.ServiceMonitor(m), dryRun)
			return err
		}
	}
	for kind, apply := range build {
		if err := apply(); err != nil {
			t.Fatalf("admitted Memcached %q %+v gives a %s the apiserver refuses: %v", name, m.Spec, kind, err)
		}
	}
	return true
}

// dryRun applies as the operator's field manager, persisting nothing.
var dryRun = metav1.ApplyOptions{FieldManager: owned.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}}

var clientset = sync.OnceValue(func() kubernetes.Interface { return kubernetes.NewForConfigOrDie(env.Config) })

var monitoringClientset = sync.OnceValue(func() monitoringclient.Interface { return monitoringclient.NewForConfigOrDie(env.Config) })

// images are the images of the operators tests start.
var images = desired.Images{Memcached: desired.DefaultImage, Exporter: desired.DefaultExporterImage}
