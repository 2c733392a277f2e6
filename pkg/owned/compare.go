package owned

import (
	"bytes"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// typeConverter knows the schemas of the kinds the operator owns, so that
// apply configurations convert to field sets with list-map keys as the
// apiserver records them in managed fields.
var typeConverter managedfields.TypeConverter = kindTypes{builtin: applyconfigurations.NewTypeConverter(clientgoscheme.Scheme)}

// identity are the fields of an apply configuration that managed fields
// never list.
var identity = fieldpath.NewSet(
	fieldpath.MakePathOrDie("apiVersion"),
	fieldpath.MakePathOrDie("kind"),
	fieldpath.MakePathOrDie("metadata", "name"),
	fieldpath.MakePathOrDie("metadata", "namespace"),
)

// appliedFields are the leaf field paths an apply configuration sets, as
// the apiserver records them in managed fields.
func appliedFields(want any) (*fieldpath.Set, error) {
	return appliedFieldsOf(typeConverter, want)
}

// appliedFieldsOf is appliedFields with the schemas of tc.
func appliedFieldsOf(tc managedfields.TypeConverter, want any) (*fieldpath.Set, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
	if err != nil {
		return nil, fmt.Errorf("converting apply configuration: %w", err)
	}
	typed, err := tc.ObjectToTyped(&unstructured.Unstructured{Object: u})
	if err != nil {
		return nil, fmt.Errorf("typing apply configuration: %w", err)
	}
	wanted, err := typed.ToFieldSet()
	if err != nil {
		return nil, fmt.Errorf("listing fields of apply configuration: %w", err)
	}
	// Managed fields never record the type and identity of the object.
	return wanted.Leaves().Difference(identity), nil
}

// lostFields are the fields the operator would apply but does not own on
// current: fields it newly sends, and fields another manager took from it
// (with kubectl edit, kubectl scale or an apply that forced them). It reads
// the operator's own managed-fields entry, so current must be a whole
// object, not a summary.
func lostFields(current client.Object, want any) (*fieldpath.Set, error) {
	lost, err := appliedFields(want)
	if err != nil {
		return nil, err
	}
	for _, e := range current.GetManagedFields() {
		if isOwnApply(e) {
			s, err := fieldSet(e)
			if err != nil {
				return nil, err
			}
			lost = lost.Difference(s)
		}
	}
	return lost, nil
}

// ManagersOfLostFields names the other field managers that now own fields
// the operator applies but no longer owns on current: those that changed
// them. current must be a whole object, with every manager's entry; a
// Summary has none of them.
func ManagersOfLostFields(current client.Object, want any) ([]string, error) {
	lost, err := lostFields(current, want)
	if err != nil {
		return nil, err
	}
	var managers []string
	for _, e := range current.GetManagedFields() {
		if e.Manager == FieldManager || e.Subresource == "status" {
			continue
		}
		s, err := fieldSet(e)
		if err != nil {
			return nil, err
		}
		if !s.Intersection(lost).Empty() && !slices.Contains(managers, e.Manager) {
			managers = append(managers, e.Manager)
		}
	}
	return managers, nil
}

func fieldSet(e metav1.ManagedFieldsEntry) (*fieldpath.Set, error) {
	s := &fieldpath.Set{}
	if e.FieldsV1 == nil {
		return s, nil
	}
	if err := s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
		return nil, fmt.Errorf("reading managed fields of %s: %w", e.Manager, err)
	}
	return s, nil
}
