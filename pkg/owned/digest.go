package owned

import (
	"encoding/json"
	"fmt"
	"hash/maphash"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

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

// computeDigest computes the digest of what FieldManager owns of a
// Deployment, Service, PodDisruptionBudget or ServiceMonitor from its
// managed fields.
func computeDigest(obj client.Object) (Digest, error) {
	var d Digest
	var owned any
	var err error
	switch o := obj.(type) {
	case *appsv1.Deployment:
		owned, err = appsv1ac.ExtractDeployment(o, FieldManager)
	case *corev1.Service:
		owned, err = corev1ac.ExtractService(o, FieldManager)
	case *policyv1.PodDisruptionBudget:
		owned, err = policyv1ac.ExtractPodDisruptionBudget(o, FieldManager)
	case *monitoringv1.ServiceMonitor:
		owned, err = extractServiceMonitor(o)
	default:
		return d, fmt.Errorf("no digest for %T", obj)
	}
	if err != nil {
		return d, fmt.Errorf("extracting the operator's fields of %s: %w", obj.GetName(), err)
	}
	if d.Values, err = valuesDigest(owned); err != nil {
		return d, err
	}
	for _, e := range obj.GetManagedFields() {
		if isOwnApply(e) {
			s, err := fieldSet(e)
			if err != nil {
				return d, err
			}
			d.Fields, err = fieldsDigest(s.Leaves())
			return d, err
		}
	}
	d.Fields, err = fieldsDigest(&fieldpath.Set{})
	return d, err
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

// DigestOf is the digest an object has right after the operator applied
// want to it and nothing else changed it: the digest of what it owns is
// then want's.
func DigestOf(want any) (Digest, error) {
	v, err := valuesDigest(want)
	if err != nil {
		return Digest{}, err
	}
	fields, err := appliedFields(want)
	if err != nil {
		return Digest{}, err
	}
	f, err := fieldsDigest(fields)
	return Digest{Values: v, Fields: f}, err
}

// digest is the digest of s, or why there is none.
func (s *Summary) digest() (Digest, error) {
	if s.Digest == nil {
		return Digest{}, fmt.Errorf("no digest of %s %s/%s: %s", s.Kind(), s.Namespace, s.Name, s.DigestError)
	}
	return *s.Digest, nil
}

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
func (s *Summary) OwnsExactly(want any) (bool, error) {
	have, err := s.digest()
	if err != nil {
		return false, err
	}
	wanted, err := appliedFields(want)
	if err != nil {
		return false, err
	}
	h, err := fieldsDigest(wanted)
	return err == nil && h == have.Fields, err
}

// StatusAppliesNothing reports whether applying want, a status of m, would
// change nothing: what StatusFieldManager owns of m's status is exactly
// want. m must carry StatusFieldManager's managed-fields entry whole, as
// the manager's cache keeps it (see KeepOwnManagedFields). It runs on
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

// KeepOwnManagedFields is the manager's cache transform for Memcacheds: it
// drops every managed-fields entry but the operator's status entry, which
// StatusAppliesNothing reads. The rest of the object is kept whole.
func KeepOwnManagedFields(obj any) (any, error) {
	m, ok := obj.(*cachev1alpha1.Memcached)
	if !ok {
		return obj, nil
	}
	var keep []metav1.ManagedFieldsEntry
	for _, e := range m.ManagedFields {
		if e.Manager == StatusFieldManager && e.Subresource == "status" {
			keep = append(keep, e)
		}
	}
	m.ManagedFields = keep
	return m, nil
}
