package owned_test

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

func TestManagersOfLostFields(t *testing.T) {
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "u"}}
	want := desired.StatefulSet(m, desired.Images{Memcached: "memcached:1"}, desired.SecretDigests{})
	all, err := owned.AppliedFields(builtin, want)
	if err != nil {
		t.Fatal(err)
	}
	replicas := fieldpath.NewSet(fieldpath.MakePathOrDie("spec", "replicas"))
	minReady := fieldpath.NewSet(fieldpath.MakePathOrDie("spec", "minReadySeconds"))
	apply, update := metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate

	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    []string
	}{
		{"we own everything", []metav1.ManagedFieldsEntry{entry(t, owned.FieldManager, apply, "", all)}, nil},
		{
			"kubectl scale took replicas",
			[]metav1.ManagedFieldsEntry{
				entry(t, owned.FieldManager, apply, "", all.Difference(replicas)),
				entry(t, "kubectl", update, "scale", replicas),
			},
			[]string{"kubectl"},
		},
		{
			"another manager owns only fields we do not send",
			[]metav1.ManagedFieldsEntry{
				entry(t, owned.FieldManager, apply, "", all),
				entry(t, "kubectl-edit", update, "", minReady),
			},
			nil,
		},
		{
			"a field we newly send is owned by nobody",
			[]metav1.ManagedFieldsEntry{entry(t, owned.FieldManager, apply, "", all.Difference(replicas))},
			nil,
		},
		{
			"status writers are never blamed",
			[]metav1.ManagedFieldsEntry{
				entry(t, owned.FieldManager, apply, "", all.Difference(replicas)),
				entry(t, "kube-controller-manager", update, "status", replicas),
			},
			nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", ManagedFields: tt.entries}}
			got, err := owned.ManagersOfLostFields(d, want, builtin)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// builtin are the schemas of a cluster without ServiceMonitors.
var builtin = owned.BuiltinSchemas()

// What the apiserver dropped or changed of what was sent is named, item by
// item; what it added (defaults) is not.
func TestFieldsNotKept(t *testing.T) {
	g := NewWithT(t)
	sent := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "spec": map[string]any{
		"replicas": 2,
		"terms": []any{
			map[string]any{"topologyKey": "zone", "matchLabelKeys": []any{"pod-template-hash"}},
			map[string]any{"topologyKey": "host"},
		},
		"gone":  map[string]any{"a": "b"},
		"value": "0.1",
	}}
	answer := map[string]any{"spec": map[string]any{
		"replicas":             2,
		"revisionHistoryLimit": 10,
		"terms": []any{
			map[string]any{"topologyKey": "zone", "weight": 1},
		},
		"value": "100m",
	}}
	g.Expect(owned.FieldsNotKept(sent, answer)).To(Equal([]string{
		".spec.gone",
		".spec.terms[0].matchLabelKeys",
		".spec.terms[1]",
		".spec.value",
	}))
	g.Expect(owned.FieldsNotKept(sent, sent)).To(BeEmpty())
}
