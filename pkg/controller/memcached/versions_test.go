//go:build integration

package memcached_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

// A Memcached that sets every field of the spec that reaches its objects,
// the scheduling fields with every option: on each Kubernetes version the
// suite runs on (make test-compat), it converges, and then costs no
// request. An apiserver that drops a field it does not know (a newer
// field, or one behind a feature gate that is off) would make the operator
// find its apply undone at every resync.
func TestEverySpecFieldConvergesAndRests(t *testing.T) {
	g := NewWithT(t)
	ns := testenv.Namespace(t, k8s)
	instance := &cachev1alpha1.LabelSelector{MatchLabels: map[string]cachev1alpha1.LabelValue{"app.kubernetes.io/instance": "full"}}
	linux := cachev1alpha1.NodeSelectorRequirement{Key: "kubernetes.io/os", Operator: "In", Values: []string{"linux"}}
	podTerm := cachev1alpha1.PodAffinityTerm{
		LabelSelector: instance, TopologyKey: "kubernetes.io/hostname",
		NamespaceSelector: &cachev1alpha1.LabelSelector{},
		MatchLabelKeys:    []cachev1alpha1.LabelKey{"pod-template-hash"},
		MismatchLabelKeys: []cachev1alpha1.LabelKey{"tenant"},
	}
	// On a version that serves MutatingAdmissionPolicies, a policy drops
	// one of the pod annotations from the StatefulSet, as a policy engine
	// might: the operator names it as it names a field the version drops.
	dropped := droppedByPolicy(t, ns, "example.com/owner")
	m := newMemcached(t, ns, "full", cachev1alpha1.MemcachedSpec{
		Size:             ptr.To[int32](2),
		ContainerPort:    ptr.To[int32](11311),
		Image:            defaultImage,
		MemoryLimitMiB:   ptr.To[int32](128),
		MaxConnections:   ptr.To[int32](2048),
		Threads:          ptr.To[int32](2),
		MaxItemSize:      "2Mi",
		Verbosity:        ptr.To[int32](1),
		ImagePullSecrets: []cachev1alpha1.ImagePullSecret{{Name: "registry"}},
		PodLabels:        map[string]cachev1alpha1.LabelValue{"team": "payments"},
		PodAnnotations:   map[string]cachev1alpha1.AnnotationValue{"example.com/owner": "payments"},
		Monitoring:       &cachev1alpha1.MonitoringSpec{Enabled: true, Interval: "30s", ServiceMonitorLabels: map[string]cachev1alpha1.LabelValue{"release": "prometheus"}},
		Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("160Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("192Mi")},
		},
		NodeSelector: map[string]cachev1alpha1.LabelValue{"kubernetes.io/os": "linux"},
		Tolerations: []cachev1alpha1.Toleration{
			{Key: "dedicated", Operator: "Equal", Value: "cache", Effect: "NoSchedule"},
			{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: ptr.To[int64](30)},
		},
		Affinity: &cachev1alpha1.Affinity{
			NodeAffinity: &cachev1alpha1.NodeAffinity{
				Required:  &cachev1alpha1.NodeSelector{NodeSelectorTerms: []cachev1alpha1.NodeSelectorTerm{{MatchExpressions: []cachev1alpha1.NodeSelectorRequirement{linux}}}},
				Preferred: []cachev1alpha1.PreferredSchedulingTerm{{Weight: 10, Preference: cachev1alpha1.NodeSelectorTerm{MatchExpressions: []cachev1alpha1.NodeSelectorRequirement{linux}}}},
			},
			PodAffinity:     &cachev1alpha1.PodAffinity{Preferred: []cachev1alpha1.WeightedPodAffinityTerm{{Weight: 5, PodAffinityTerm: podTerm}}},
			PodAntiAffinity: &cachev1alpha1.PodAffinity{Preferred: []cachev1alpha1.WeightedPodAffinityTerm{{Weight: 50, PodAffinityTerm: podTerm}}},
		},
		TopologySpreadConstraints: []cachev1alpha1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: "DoNotSchedule",
			LabelSelector: instance, MinDomains: ptr.To[int32](1),
			NodeAffinityPolicy: ptr.To("Honor"), NodeTaintsPolicy: ptr.To("Ignore"),
			MatchLabelKeys: []cachev1alpha1.LabelKey{"pod-template-hash"},
		}},
	})
	_, dep := converged(t, m)
	// Let the last status write and its watch events settle.
	time.Sleep(2 * time.Second)

	// An apiserver before 1.31 drops matchLabelKeys and mismatchLabelKeys
	// of pod affinity terms (their feature gate is off): the operator says
	// so, once, naming them, with what the policy dropped. One that keeps
	// them, without the policy, gets no such event.
	var notKept []string
	term := dep.Spec.Template.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	if len(term.MatchLabelKeys) == 0 {
		t.Logf("Kubernetes %s did not keep matchLabelKeys of pod affinity terms", repo.KubeVersion())
		notKept = append(notKept, ".matchLabelKeys", ".mismatchLabelKeys")
	} else {
		g.Expect(term.MismatchLabelKeys).To(Equal([]string{"tenant"}))
	}
	if dropped {
		t.Logf("Kubernetes %s serves MutatingAdmissionPolicies: one dropped a pod annotation", repo.KubeVersion())
		g.Expect(dep.Spec.Template.Annotations).NotTo(HaveKey("example.com/owner"))
		notKept = append(notKept, "example.com/owner")
	}
	if len(notKept) == 0 {
		g.Expect(events(t, ns, m.Name, "FieldsNotKept")).To(BeEmpty())
	} else {
		g.Eventually(func(g Gomega) {
			told := events(t, ns, m.Name, "FieldsNotKept")
			g.Expect(told).To(HaveLen(1))
			g.Expect(told[0].Note).To(ContainSubstring("StatefulSet full"))
			for _, field := range notKept {
				g.Expect(told[0].Note).To(ContainSubstring(field))
			}
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	}

	mark := requests.Mark()
	skipped := counterSum(t, "memcached_operator_applies_skipped_total", "kind", "StatefulSet")
	nudge(t, dep) // a reconcile with nothing to do
	time.Sleep(window)
	sent := requests.Since(mark, testenv.NotWatch, inNamespace(ns))
	g.Expect(sent).To(BeEmpty(), "a converged Memcached that sets every field costs no request")
	g.Expect(counterSum(t, "memcached_operator_applies_skipped_total", "kind", "StatefulSet")).To(BeNumerically(">", skipped),
		"the Memcached was reconciled again in the window")
}
