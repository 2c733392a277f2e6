package owned

// The rule that makes a Memcached at rest cost no request: an apply
// configuration the operator builds equals, field for field, what the
// apiserver recorded of the operator's last apply exactly when applying it
// would change nothing. Everything that decides whether an apply is needed
// is here; its inputs (the object as recorded, the apply configuration,
// the Schemas of the owned kinds) are passed in.

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"slices"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1ac "github.com/prometheus-operator/prometheus-operator/pkg/client/applyconfiguration/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	cacheac "github.com/example/memcached-operator/applyconfig/api/v1alpha1"
)

// Digest sums up what one field manager owns of an object: Values hashes
// the apply configuration that extracting the manager's fields gives, as
// JSON, so that it equals the hash of a desired apply configuration
// exactly when applying that would change nothing; Fields hashes the leaf
// field paths the manager owns, so that it equals the hash of the paths a
// desired apply configuration sets exactly when it owns all and only those.
// Digests are seeded per process and never leave it.
//
// +kubebuilder:object:generate=true
type Digest struct {
	Values uint64 `json:"values"`
	Fields uint64 `json:"fields"`
}

// digestSeed seeds every hash of the process.
var digestSeed = maphash.MakeSeed()

// AppliesNothing reports whether applying want would change nothing on the
// object s summarizes: the fields and values the operator owns of it are
// exactly those of want. It costs a hash of want.
func (s *Summary) AppliesNothing(want any) (bool, error) {
	have, err := s.digest()
	if err != nil {
		return false, err
	}
	h, err := valuesDigest(want)
	return err == nil && h == have.Values, err
}

// OwnsExactly reports whether the operator owns on the object s summarizes
// exactly the fields want sets: then it has lost none of them to another
// manager.
func (s *Summary) OwnsExactly(want any, schemas *Schemas) (bool, error) {
	have, err := s.digest()
	if err != nil {
		return false, err
	}
	wanted, err := appliedFields(schemas, want)
	if err != nil {
		return false, err
	}
	h, err := fieldsDigest(wanted)
	return err == nil && h == have.Fields, err
}

// DigestOf is the digest an object has right after the operator applied
// want to it and nothing else changed it: the digest of what it owns is
// then want's.
func DigestOf(want any, schemas *Schemas) (Digest, error) {
	v, err := valuesDigest(want)
	if err != nil {
		return Digest{}, err
	}
	fields, err := appliedFields(schemas, want)
	if err != nil {
		return Digest{}, err
	}
	f, err := fieldsDigest(fields)
	return Digest{Values: v, Fields: f}, err
}

// StatusAppliesNothing reports whether applying want, a status of m, would
// change nothing: what StatusFieldManager owns of m's status is exactly
// want. m must carry StatusFieldManager's managed-fields entry whole, as
// the manager's cache keeps it (see KeepStatusManagerEntry). It runs on
// every reconcile, so it compares values only: the status has no other
// manager to lose fields to that the operator would name.
func StatusAppliesNothing(m *cachev1alpha1.Memcached, want *cacheac.MemcachedApplyConfiguration) (bool, error) {
	owned, err := cacheac.ExtractMemcachedStatus(m, StatusFieldManager)
	if err != nil {
		return false, fmt.Errorf("extracting the operator's status fields of %s: %w", m.Name, err)
	}
	have, err := valuesDigest(owned)
	if err != nil {
		return false, err
	}
	h, err := valuesDigest(want)
	return err == nil && h == have, err
}

// KeepStatusManagerEntry is the manager's cache transform for Memcacheds:
// of their managed fields it keeps StatusFieldManager's entry of the status
// alone, which StatusAppliesNothing reads. The rest of the object is kept
// whole.
func KeepStatusManagerEntry(obj any) (any, error) {
	m, ok := obj.(*cachev1alpha1.Memcached)
	if !ok {
		return obj, nil
	}
	m.ManagedFields = slices.DeleteFunc(m.ManagedFields, func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager != StatusFieldManager || e.Subresource != "status"
	})
	return m, nil
}

// ownApply is the operator's managed-fields entry for its applies to the
// object itself (not to a subresource): the fields FieldManager owns. Nil
// when entries hold none.
func ownApply(entries []metav1.ManagedFieldsEntry) *metav1.ManagedFieldsEntry {
	for i, e := range entries {
		if e.Manager == FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			return &entries[i]
		}
	}
	return nil
}

// digest is the digest of s, or why there is none.
func (s *Summary) digest() (Digest, error) {
	if s.Digest == nil {
		return Digest{}, fmt.Errorf("no digest of %s %s/%s: %s", s.Kind(), s.Namespace, s.Name, s.DigestError)
	}
	return *s.Digest, nil
}

// digestOf computes the digest of what FieldManager owns of a whole object
// of one of Kinds from its managed fields.
func digestOf(obj client.Object, schemas *Schemas) (Digest, error) {
	var d Digest
	desc, ok := describeObject(obj)
	if !ok {
		return d, fmt.Errorf("no digest for %T", obj)
	}
	owned, err := desc.Extract(obj, schemas)
	if err != nil {
		return d, fmt.Errorf("extracting the operator's fields of %s: %w", obj.GetName(), err)
	}
	if d.Values, err = valuesDigest(owned); err != nil {
		return d, err
	}
	fields := &fieldpath.Set{}
	if e := ownApply(obj.GetManagedFields()); e != nil {
		if fields, err = fieldSet(*e); err != nil {
			return d, err
		}
	}
	d.Fields, err = fieldsDigest(fields.Leaves())
	return d, err
}

// extractServiceMonitor is what FieldManager owns of sm, as an apply
// configuration: what client-go's generated Extract functions give for the
// built-in kinds, which the Prometheus Operator's client does not generate.
func extractServiceMonitor(sm *monitoringv1.ServiceMonitor, schemas *Schemas) (*monitoringv1ac.ServiceMonitorApplyConfiguration, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sm)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{Object: u}
	obj.SetGroupVersionKind(monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.ServiceMonitorsKind))
	tv, err := schemas.ObjectToTyped(obj, typed.AllowDuplicates)
	if err != nil {
		return nil, err
	}
	ac := &monitoringv1ac.ServiceMonitorApplyConfiguration{}
	if e := ownApply(sm.GetManagedFields()); e != nil {
		fields, err := fieldSet(*e)
		if err != nil {
			return nil, err
		}
		extracted, ok := tv.ExtractItems(fields.Leaves()).AsValue().Unstructured().(map[string]any)
		if !ok {
			return nil, fmt.Errorf("extracting the operator's fields of ServiceMonitor %s: not an object", sm.Name)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(extracted, ac); err != nil {
			return nil, err
		}
	}
	// Managed fields never hold the type and identity; an apply
	// configuration always does.
	return ac.WithKind(monitoringv1.ServiceMonitorsKind).
		WithAPIVersion(monitoringv1.SchemeGroupVersion.String()).
		WithName(sm.Name).
		WithNamespace(sm.Namespace), nil
}

// valuesDigest hashes an apply configuration as the JSON it sends: two
// apply configurations of one type encode alike exactly when they hold the
// same fields and values.
func valuesDigest(ac any) (uint64, error) {
	var h maphash.Hash
	h.SetSeed(digestSeed)
	if err := json.NewEncoder(&h).Encode(ac); err != nil {
		return 0, fmt.Errorf("encoding apply configuration: %w", err)
	}
	return h.Sum64(), nil
}

// fieldsDigest hashes a set of field paths in its sorted serialization.
func fieldsDigest(s *fieldpath.Set) (uint64, error) {
	raw, err := s.ToJSON()
	if err != nil {
		return 0, fmt.Errorf("encoding field set: %w", err)
	}
	return maphash.Bytes(digestSeed, raw), nil
}
