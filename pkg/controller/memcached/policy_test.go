//go:build integration

package memcached_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// droppedByPolicy makes the apiserver drop the pod annotation key from the
// template of every StatefulSet of ns, as a policy engine's mutation
// might: a MutatingAdmissionPolicy and its binding, on a version that
// serves them (admissionregistration.k8s.io/v1, from 1.36). It returns
// whether it did, once the apiserver applies the policy (a dry-run create
// comes back without the annotation).
func droppedByPolicy(t *testing.T, ns, key string) bool {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	resources, err := dc.ServerResourcesForGroupVersion(admissionregistrationv1.SchemeGroupVersion.String())
	g.Expect(err).NotTo(HaveOccurred())
	if !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == "mutatingadmissionpolicies" }) {
		return false
	}
	path := "/spec/template/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
	policy := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "drop-annotation-" + ns},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"statefulsets"}},
				}}},
			},
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name:       "has-the-annotation",
				Expression: `has(object.spec.template.metadata.annotations) && '` + key + `' in object.spec.template.metadata.annotations`,
			}},
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "remove", path: "` + path + `"}]`},
			}},
			FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		},
	}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName: policy.Name,
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns},
			}},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		g.Expect(k8s.Create(ctx, obj)).To(Succeed())
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	}
	g.Eventually(func(g Gomega) {
		labels := map[string]string{"app": "probe"}
		probe := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "policy-probe"},
			Spec: appsv1.StatefulSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{key: "x"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: defaultImage}}},
				},
			},
		}
		g.Expect(k8s.Create(ctx, probe, client.DryRunAll)).To(Succeed())
		g.Expect(probe.Spec.Template.Annotations).NotTo(HaveKey(key))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return true
}
