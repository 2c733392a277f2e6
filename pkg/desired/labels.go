package desired

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"

	"k8s.io/apimachinery/pkg/util/validation"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// instanceLabelValue is the value of LabelInstance for a Memcached: its name
// when that is a valid label value, otherwise a shortened name with a hash
// of the full name. The CRD admits only names of at most 63 characters, which
// are always valid label values; the fallback keeps the builder total for
// any input.
func instanceLabelValue(name string) string {
	if len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := hex.EncodeToString(sum[:])[:10]
	prefix := name
	if max := validation.LabelValueMaxLength - len(suffix) - 1; len(prefix) > max {
		prefix = prefix[:max]
	}
	// A label value must start and end with an alphanumeric character;
	// object names may contain dots that a cut could leave at the end.
	for len(prefix) > 0 && !isAlphanumeric(prefix[len(prefix)-1]) {
		prefix = prefix[:len(prefix)-1]
	}
	return prefix + "-" + suffix
}

func isAlphanumeric(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// SelectorLabels are the labels that select a Memcached's pods. They are
// derived from the name only, which never changes, because a StatefulSet's
// selector is immutable.
func SelectorLabels(m *cachev1alpha1.Memcached) map[string]string {
	return map[string]string{LabelMemcached: instanceLabelValue(m.Name)}
}

// LegacySelectorLabels are the labels that selected a Memcached's pods in
// the operator's versions that ran them with a Deployment. Its pods and
// the StatefulSet's both carry them: while such a Deployment is replaced,
// the Service and the NetworkPolicy select by them (see servingSelector).
func LegacySelectorLabels(m *cachev1alpha1.Memcached) map[string]string {
	return map[string]string{
		labelName:     appName,
		LabelInstance: instanceLabelValue(m.Name),
	}
}

// Labels are the labels of every object the operator creates for a Memcached.
func Labels(m *cachev1alpha1.Memcached) map[string]string {
	l := LegacySelectorLabels(m)
	maps.Copy(l, SelectorLabels(m))
	l[LabelManagedBy] = ManagedBy
	return l
}

// servingSelector selects the pods that serve m's clients: m's own, and
// while a Deployment of an earlier version of the operator is replaced
// (replacing), its pods too, which serve until the slots are ready.
func servingSelector(m *cachev1alpha1.Memcached, replacing bool) map[string]string {
	if replacing {
		return LegacySelectorLabels(m)
	}
	return SelectorLabels(m)
}

// ownerReference makes m the controller of an object.
func ownerReference(m *cachev1alpha1.Memcached) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(cachev1alpha1.SchemeGroupVersion.String()).
		WithKind(cachev1alpha1.Kind).
		WithName(m.Name).
		WithUID(m.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}
