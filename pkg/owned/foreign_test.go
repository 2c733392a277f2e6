package owned_test

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

// Anyone may label a ConfigMap or a pod as the operator's: what the store
// keeps of one that is not a Memcached's (its membership ConfigMap, its
// StatefulSet's pod) is a few hundred bytes, whatever it carries.
func TestAnObjectLabelledByAnotherHandCostsTheStoreLittle(t *testing.T) {
	big := strings.Repeat("x", 900<<10)
	many := make([]metav1.OwnerReference, 2000)
	for i := range many {
		many[i] = metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "p", UID: types.UID(strings.Repeat("u", 36))}
	}
	memcached := func(name string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: cachev1alpha1.SchemeGroupVersion.String(), Kind: cachev1alpha1.Kind, Name: name, UID: "m", Controller: ptr.To(true)}
	}
	labels := map[string]string{desired.LabelManagedBy: desired.ManagedBy}
	size := func(g Gomega, v any) int {
		b, err := json.Marshal(v)
		g.Expect(err).NotTo(HaveOccurred())
		return len(b)
	}
	tests := []struct {
		name string
		refs []metav1.OwnerReference
		data map[string]string
		kept bool
	}{
		{name: "no owner", refs: many, data: map[string]string{desired.MembershipKey: big, desired.MoveKey: big}},
		{name: "a Memcached of another name", refs: append(many, memcached("other")), data: map[string]string{desired.MembershipKey: "1\n\n"}},
		{name: "the Memcached's, too large", refs: []metav1.OwnerReference{memcached("c")}, data: map[string]string{desired.MembershipKey: big}},
		{name: "the Memcached's", refs: append(many, memcached("c")), data: map[string]string{desired.MembershipKey: "1\n\n", desired.MoveKey: "{}"}, kept: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "c" + desired.MembershipSuffix, Namespace: "ns", Labels: labels, Annotations: map[string]string{"a": big}, OwnerReferences: tt.refs},
				Data:       tt.data,
			}
			s, err := owned.SummarizeAnswer(cm)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Membership != "").To(Equal(tt.kept))
			g.Expect(s.Move != "").To(Equal(tt.kept && tt.data[desired.MoveKey] != ""))
			g.Expect(size(g, s)).To(BeNumerically("<", 1<<10), "bytes kept")
		})
	}

	t.Run("a pod no StatefulSet controls", func(t *testing.T) {
		g := NewWithT(t)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", OwnerReferences: many,
				Labels:      map[string]string{desired.LabelManagedBy: desired.ManagedBy, appsv1.ControllerRevisionHashLabelKey: big},
				Annotations: map[string]string{desired.AnnotationPodShape: "x", "a": big}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", Message: big}}}}},
		}
		g.Expect(size(g, owned.SummarizePod(p))).To(BeNumerically("<", 1<<10), "bytes kept")
	})
}
