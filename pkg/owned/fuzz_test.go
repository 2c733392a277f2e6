//go:build integration

package owned_test

import (
	"context"
	"sync"
	"testing"

	monitoringclient "github.com/prometheus-operator/prometheus-operator/pkg/client/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
		type built struct {
			apply func() (client.Object, error)
			again func() any
		}
		kinds := map[owned.Kind]built{
			owned.KindDeployment: {
				func() (client.Object, error) {
					return clientset().AppsV1().Deployments(m.Namespace).Apply(ctx, desired.Deployment(m, images, fuzzspec.Digests), dryRun)
				},
				func() any { return desired.Deployment(m, images, fuzzspec.Digests) },
			},
			owned.KindService: {
				func() (client.Object, error) {
					return clientset().CoreV1().Services(m.Namespace).Apply(ctx, desired.Service(m), dryRun)
				},
				func() any { return desired.Service(m) },
			},
			owned.KindPodDisruptionBudget: {
				func() (client.Object, error) {
					return clientset().PolicyV1().PodDisruptionBudgets(m.Namespace).Apply(ctx, desired.PodDisruptionBudget(m), dryRun)
				},
				func() any { return desired.PodDisruptionBudget(m) },
			},
		}
		if desired.Monitored(m) {
			if !schemas().ServiceMonitors() {
				t.Fatal("the test apiserver serves no ServiceMonitors")
			}
			kinds[owned.KindServiceMonitor] = built{
				func() (client.Object, error) {
					return monitoringClientset().MonitoringV1().ServiceMonitors(m.Namespace).Apply(ctx, desired.ServiceMonitor(m), dryRun)
				},
				func() any { return desired.ServiceMonitor(m) },
			}
		}
		for kind, b := range kinds {
			obj, err := b.apply()
			if err != nil {
				t.Fatalf("admitted Memcached %q %+v gives a %s the apiserver refuses: %v", m.Name, m.Spec, kind, err)
			}
			s, err := owned.Summarize(obj, schemas())
			if err != nil {
				t.Fatalf("summarizing %s: %v", kind, err)
			}
			if nothing, err := s.AppliesNothing(b.again()); err != nil || !nothing {
				t.Fatalf("admitted Memcached %q %+v: the %s the apiserver recorded does not compare as applying nothing (err %v): a converged Memcached would be applied on every reconcile", m.Name, m.Spec, kind, err)
			}
			if exactly, err := s.OwnsExactly(b.again(), schemas()); err != nil || !exactly {
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

// dryRun applies as the operator's field manager, persisting nothing.
var dryRun = metav1.ApplyOptions{FieldManager: owned.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}}

var clientset = sync.OnceValue(func() kubernetes.Interface { return kubernetes.NewForConfigOrDie(env.Config) })

var monitoringClientset = sync.OnceValue(func() monitoringclient.Interface { return monitoringclient.NewForConfigOrDie(env.Config) })

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

// images are the images of the operators tests start.
var images = desired.Images{Memcached: desired.DefaultImage, Exporter: desired.DefaultExporterImage}
