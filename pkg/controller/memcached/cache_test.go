package memcached

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

func TestTrimKeepsOnlyWhatTheOperatorReads(t *testing.T) {
	entries := func(managers ...string) []metav1.ManagedFieldsEntry {
		var out []metav1.ManagedFieldsEntry
		for _, m := range managers {
			out = append(out, metav1.ManagedFieldsEntry{Manager: m})
		}
		return out
	}
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name:          "cache",
			Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "payments"},
			ManagedFields: entries(FieldManager, StatusFieldManager, "kube-controller-manager", "argocd-controller"),
		}
	}
	tests := []struct {
		name string
		obj  client.Object
		keep string
	}{
		{"Deployment", &appsv1.Deployment{ObjectMeta: meta()}, FieldManager},
		{"Memcached", &cachev1alpha1.Memcached{ObjectMeta: meta()}, StatusFieldManager},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := trim(tt.obj)
			g.Expect(err).NotTo(HaveOccurred())
			o := out.(client.Object)
			g.Expect(o.GetManagedFields()).To(Equal(entries(tt.keep)))
			g.Expect(o.GetAnnotations()).To(Equal(map[string]string{"team": "payments"}))
		})
	}
}
