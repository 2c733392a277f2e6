package owned

// Which fields the operator set and lost, or set and the apiserver did
// not keep: read only when an apply is due anyway (applies.go decides).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// ManagersOfLostFields names the other field managers that now own fields
// the operator applies but no longer owns on current: those that changed
// them (with kubectl edit, kubectl scale or an apply that forced them).
// current must be a whole object, with every manager's entry; a Summary
// has none of them.
func ManagersOfLostFields(current client.Object, want any, schemas *Schemas) ([]string, error) {
	lost, err := appliedFields(schemas, want)
	if err != nil {
		return nil, err
	}
	if e := ownApply(current.GetManagedFields()); e != nil {
		s, err := fieldSet(*e)
		if err != nil {
			return nil, err
		}
		lost = lost.Difference(s)
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

// FieldsNotKept names the values of sent, an apply configuration as sent,
// that answer, the apiserver's answer to it, does not hold as sent: after
// an apply that changed nothing although the operator's digest differed,
// the fields the apiserver dropped (its Kubernetes version does not serve
// them, or their feature gate is off) or kept otherwise. Values the
// answer adds (defaults) are not compared. Lists are compared item by
// item, in order, as the apiserver keeps them.
func FieldsNotKept(sent, answer any) ([]string, error) {
	var s, a any
	for _, v := range []struct {
		from any
		to   *any
	}{{sent, &s}, {answer, &a}} {
		raw, err := json.Marshal(v.from)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, v.to); err != nil {
			return nil, err
		}
	}
	// The type is not a field: a typed object read from the API has none.
	for _, m := range []any{s, a} {
		if m, ok := m.(map[string]any); ok {
			delete(m, "apiVersion")
			delete(m, "kind")
		}
	}
	return notKept("", s, a, nil), nil
}

// notKept appends to paths the path of each value of sent, under path, that
// kept does not hold.
func notKept(path string, sent, kept any, paths []string) []string {
	switch s := sent.(type) {
	case map[string]any:
		k, ok := kept.(map[string]any)
		if !ok {
			return append(paths, path)
		}
		for _, key := range slices.Sorted(maps.Keys(s)) {
			if _, ok := k[key]; !ok {
				paths = append(paths, path+"."+key)
				continue
			}
			paths = notKept(path+"."+key, s[key], k[key], paths)
		}
	case []any:
		k, ok := kept.([]any)
		if !ok {
			return append(paths, path)
		}
		for i := range s {
			if i >= len(k) {
				paths = append(paths, fmt.Sprintf("%s[%d]", path, i))
				continue
			}
			paths = notKept(fmt.Sprintf("%s[%d]", path, i), s[i], k[i], paths)
		}
	default:
		if !reflect.DeepEqual(sent, kept) {
			paths = append(paths, path)
		}
	}
	return paths
}

// identity are the fields of an apply configuration that managed fields
// never list.
var identity = fieldpath.NewSet(
	fieldpath.MakePathOrDie("apiVersion"),
	fieldpath.MakePathOrDie("kind"),
	fieldpath.MakePathOrDie("metadata", "name"),
	fieldpath.MakePathOrDie("metadata", "namespace"),
)

// appliedFields are the leaf field paths an apply configuration sets, as
// the apiserver records them in managed fields, typed with tc.
func appliedFields(tc managedfields.TypeConverter, want any) (*fieldpath.Set, error) {
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
