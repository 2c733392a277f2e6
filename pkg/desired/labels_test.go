package desired

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// A name that is not a valid label value is cut to fit exactly, ends on
// an alphanumeric character, and keeps a hash of the whole name.
func TestInstanceLabelValueIsCutToFitExactly(t *testing.T) {
	long := strings.Repeat("a", 51) + ".b" + strings.Repeat("c", 20)
	tests := []struct {
		name, in, prefix string
	}{
		{"a valid one", "cache", "cache"},
		{"one too long", strings.Repeat("a", 70), strings.Repeat("a", 52) + "-"},
		{"a cut that would end on a dot", long, strings.Repeat("a", 51) + "-"},
		{"ends on a character a label value cannot", "cache-", "cache-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := instanceLabelValue(tt.in)
			g.Expect(validation.IsValidLabelValue(got)).To(BeEmpty(), "%q", got)
			g.Expect(got).To(HavePrefix(tt.prefix))
			if tt.in != "cache" {
				g.Expect(got).To(HaveLen(len(strings.TrimSuffix(tt.prefix, "-")) + 11))
			}
		})
	}
}

// Letters and digits are alphanumeric, at both ends of their ranges; the
// characters beside them are not.
func TestIsAlphanumeric(t *testing.T) {
	g := NewWithT(t)
	for _, c := range []byte("azAZ09") {
		g.Expect(isAlphanumeric(c)).To(BeTrue(), "%c", c)
	}
	for _, c := range []byte("`{@[/:.-") {
		g.Expect(isAlphanumeric(c)).To(BeFalse(), "%c", c)
	}
}

// Resources are copied as given: a list left empty is not sent as one.
func TestResourcesSendOnlyWhatIsGiven(t *testing.T) {
	g := NewWithT(t)
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	r := resources(&corev1.ResourceRequirements{Requests: cpu})
	g.Expect(r.Requests).NotTo(BeNil())
	g.Expect(r.Limits).To(BeNil())
	r = resources(&corev1.ResourceRequirements{Limits: cpu})
	g.Expect(r.Limits).NotTo(BeNil())
	g.Expect(r.Requests).To(BeNil())
	g.Expect(resources(&corev1.ResourceRequirements{})).To(BeNil())
	r = resources(&corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}})
	g.Expect(r).NotTo(BeNil())
	g.Expect(r.Claims).To(HaveLen(1))
	g.Expect(r.Claims[0].Request).To(BeNil(), "no request named where the claim names none")
	r = resources(&corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu", Request: "first"}}})
	g.Expect(r.Claims).To(ConsistOf(HaveField("Request", HaveValue(Equal("first")))))
}
