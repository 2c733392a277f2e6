package owned

import (
	"testing"

	. "github.com/onsi/gomega"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// The reasons the API documents for a foreign object of each kind are the
// ones the descriptors give.
func TestTheAPINamesEachKindsNotOwnedReason(t *testing.T) {
	for kind, reason := range map[Kind]string{
		KindStatefulSet:         cachev1alpha1.ReasonStatefulSetNotOwned,
		KindService:             cachev1alpha1.ReasonServiceNotOwned,
		KindPodDisruptionBudget: cachev1alpha1.ReasonPodDisruptionBudgetNotOwned,
		KindServiceMonitor:      cachev1alpha1.ReasonServiceMonitorNotOwned,
		KindNetworkPolicy:       cachev1alpha1.ReasonNetworkPolicyNotOwned,
		KindConfigMap:           cachev1alpha1.ReasonConfigMapNotOwned,
	} {
		d, ok := Describe(kind)
		NewWithT(t).Expect(ok).To(BeTrue(), "%s", kind)
		NewWithT(t).Expect(d.NotOwnedReason()).To(Equal(reason))
	}
}

// Each descriptor summarizes and digests an object of its own kind, with
// the kind and version the object's API gives.
func TestEveryKindIsSummarizedAndDigested(t *testing.T) {
	for _, d := range Kinds {
		t.Run(string(d.Kind), func(t *testing.T) {
			g := NewWithT(t)
			obj := d.New()
			obj.SetName("c" + d.Suffix)
			s, err := SummarizeAnswer(obj)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Kind()).To(Equal(d.Kind))
			g.Expect(s.APIVersion).To(Equal(d.Resource.GroupVersion().String()))
			// A kind of a CRD is typed by the schema learnt from the
			// cluster: without it, extracting says so.
			_, err = d.Extract(obj, BuiltinSchemas())
			if d.ServedByCRD {
				g.Expect(err).To(MatchError(ContainSubstring("schema")))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
		})
	}
}
