package owned

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// OwnersOf are the entries of managed fields that own the field at path,
// other than manager's.
func OwnersOf(entries []metav1.ManagedFieldsEntry, path fieldpath.Path, manager string) ([]metav1.ManagedFieldsEntry, error) {
	var out []metav1.ManagedFieldsEntry
	for _, e := range entries {
		if e.Manager == manager {
			continue
		}
		s, err := fieldSet(e)
		if err != nil {
			return nil, err
		}
		if s.Has(path) {
			out = append(out, e)
		}
	}
	return out, nil
}
