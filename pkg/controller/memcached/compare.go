package memcached

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// typeConverter knows the schemas of the built-in types, so that apply
// configurations convert to field sets with list-map keys as the apiserver
// records them in managed fields.
var typeConverter = applyconfigurations.NewTypeConverter(clientgoscheme.Scheme)

// jsonEqual compares two apply configurations by the JSON they would send.
func jsonEqual(a, b any) (bool, error) {
	am, err := toMap(a)
	if err != nil {
		return false, err
	}
	bm, err := toMap(b)
	if err != nil {
		return false, err
	}
	return equality.Semantic.DeepEqual(am, bm), nil
}

func toMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding apply configuration: %w", err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decoding apply configuration: %w", err)
	}
	return m, nil
}

// identity are the fields of an apply configuration that managed fields
// never list.
var identity = fieldpath.NewSet(
	fieldpath.MakePathOrDie("apiVersion"),
	fieldpath.MakePathOrDie("kind"),
	fieldpath.MakePathOrDie("metadata", "name"),
	fieldpath.MakePathOrDie("metadata", "namespace"),
)

// lostFields are the fields the operator would apply but does not own on
// current: fields it newly sends, and fields another manager took from it
// (with kubectl edit, kubectl scale or an apply that forced them). It reads
// only the operator's own managed-fields entry.
func lostFields(current client.Object, want runtime.ApplyConfiguration) (*fieldpath.Set, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
	if err != nil {
		return nil, fmt.Errorf("converting apply configuration: %w", err)
	}
	typed, err := typeConverter.ObjectToTyped(&unstructured.Unstructured{Object: u})
	if err != nil {
		return nil, fmt.Errorf("typing apply configuration: %w", err)
	}
	wanted, err := typed.ToFieldSet()
	if err != nil {
		return nil, fmt.Errorf("listing fields of apply configuration: %w", err)
	}
	// Managed fields never record the type and identity of the object.
	lost := wanted.Leaves().Difference(identity)
	for _, e := range current.GetManagedFields() {
		if e.Manager == FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			s, err := fieldSet(e)
			if err != nil {
				return nil, err
			}
			lost = lost.Difference(s)
		}
	}
	return lost, nil
}

// managersOfLostFields names the other field managers that now own fields
// the operator applies but no longer owns on current: those that changed
// them. current must carry every manager's entry, which cached objects do
// not (see CacheOptions).
func managersOfLostFields(current client.Object, want runtime.ApplyConfiguration) ([]string, error) {
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
