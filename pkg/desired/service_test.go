package desired

import (
	"reflect"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/jsonconv"
)

func TestService(t *testing.T) {
	tests := []struct {
		name        string
		m           *cachev1alpha1.Memcached
		wantPort    int32
		wantAddress string
	}{
		{"default port", memcached("cache", cachev1alpha1.MemcachedSpec{}), 11211, "cache.ns.svc:11211"},
		{"own port", memcached("sessions", cachev1alpha1.MemcachedSpec{ContainerPort: ptr.To[int32](11311)}), 11311, "sessions.ns.svc:11311"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := Service(tt.m, false)
			g.Expect(*s.Name).To(Equal(tt.m.Name))
			g.Expect(*s.Namespace).To(Equal("ns"))
			g.Expect(s.Labels).To(Equal(Labels(tt.m)))
			g.Expect(s.OwnerReferences).To(HaveLen(1))
			g.Expect(*s.OwnerReferences[0].Controller).To(BeTrue())
			g.Expect(*s.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone), "headless: one address per pod")
			g.Expect(s.Spec.Selector).To(Equal(map[string]string{LabelMemcached: tt.m.Name}), "exactly this instance's pods, by the project's own label")
			g.Expect(Service(tt.m, true).Spec.Selector).To(Equal(map[string]string{"app.kubernetes.io/name": "memcached", LabelInstance: tt.m.Name}),
				"while a Deployment of an earlier version is replaced, its pods too")
			g.Expect(s.Spec.Ports).To(HaveLen(1))
			p := s.Spec.Ports[0]
			g.Expect(*p.Name).To(Equal("memcached"))
			g.Expect(*p.Port).To(Equal(tt.wantPort))
			g.Expect(*p.TargetPort).To(Equal(intstr.FromString(PortName)))
			g.Expect(*p.Protocol).To(Equal(corev1.ProtocolTCP))
			g.Expect(Address(*s.Name, *s.Namespace, *p.Port)).To(Equal(tt.wantAddress))
		})
	}
}

func TestPodDisruptionBudget(t *testing.T) {
	tests := []struct {
		size int32
		want bool
	}{{0, false}, {1, false}, {2, true}, {3, true}, {100, true}}
	for _, tt := range tests {
		m := memcached("cache", cachev1alpha1.MemcachedSpec{Size: ptr.To(tt.size)})
		if got := WantsPodDisruptionBudget(m); got != tt.want {
			t.Errorf("size %d: WantsPodDisruptionBudget = %v, want %v", tt.size, got, tt.want)
		}
	}

	g := NewWithT(t)
	m := memcached("cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)})
	p := PodDisruptionBudget(m)
	g.Expect(*p.Name).To(Equal("cache"))
	g.Expect(p.Labels).To(Equal(Labels(m)))
	g.Expect(*p.OwnerReferences[0].Controller).To(BeTrue())
	g.Expect(*p.Spec.MaxUnavailable).To(Equal(intstr.FromInt32(1)))
	g.Expect(p.Spec.MinAvailable).To(BeNil(), "one of minAvailable and maxUnavailable only")
	g.Expect(p.Spec.Selector.MatchLabels).To(Equal(SelectorLabels(m)))
	g.Expect(*Budget(m, true).Spec.MaxUnavailable).To(Equal(intstr.FromInt32(0)), "no pod goes while keys move")
}

func TestSchedulingDefaultsToSpreadingAcrossNodes(t *testing.T) {
	g := NewWithT(t)
	m := memcached("cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](4)})
	ps := StatefulSet(m, Images{Memcached: "memcached:1"}, SecretDigests{}).Spec.Template.Spec
	g.Expect(ps.TopologySpreadConstraints).To(HaveLen(1))
	c := ps.TopologySpreadConstraints[0]
	g.Expect(*c.TopologyKey).To(Equal("kubernetes.io/hostname"))
	g.Expect(*c.MaxSkew).To(Equal(int32(1)))
	g.Expect(*c.WhenUnsatisfiable).To(Equal(corev1.ScheduleAnyway), "never leaves a pod Pending for spreading's sake")
	g.Expect(c.LabelSelector.MatchLabels).To(Equal(SelectorLabels(m)))
	g.Expect(c.MatchLabelKeys).To(ConsistOf("controller-revision-hash"), "each revision spread on its own")
	g.Expect(ps.Affinity).To(BeNil())
	g.Expect(ps.Tolerations).To(BeEmpty())
	g.Expect(ps.NodeSelector).To(BeEmpty())
}

func TestSchedulingFieldsPassThrough(t *testing.T) {
	g := NewWithT(t)
	spread := cachev1alpha1.TopologySpreadConstraint{
		MaxSkew: 2, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: "DoNotSchedule",
		LabelSelector: &cachev1alpha1.LabelSelector{MatchLabels: map[string]cachev1alpha1.LabelValue{"app.kubernetes.io/instance": "cache"}},
		MinDomains:    ptr.To[int32](3),
	}
	affinity := &cachev1alpha1.Affinity{NodeAffinity: &cachev1alpha1.NodeAffinity{
		Required: &cachev1alpha1.NodeSelector{NodeSelectorTerms: []cachev1alpha1.NodeSelectorTerm{{
			MatchExpressions: []cachev1alpha1.NodeSelectorRequirement{{Key: "pool", Operator: "In", Values: []string{"cache", "general"}}},
		}}},
	}}
	tolerations := []cachev1alpha1.Toleration{
		{Key: "dedicated", Operator: "Equal", Value: "cache", Effect: "NoSchedule"},
		{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: ptr.To[int64](30)},
	}
	m := memcached("cache", cachev1alpha1.MemcachedSpec{
		NodeSelector:              map[string]cachev1alpha1.LabelValue{"pool": "cache"},
		Affinity:                  affinity,
		Tolerations:               tolerations,
		TopologySpreadConstraints: []cachev1alpha1.TopologySpreadConstraint{spread},
	})
	d := StatefulSet(m, Images{Memcached: "memcached:1"}, SecretDigests{})

	// What the Deployment's pod template says is exactly what the spec
	// said, read as the core API reads it.
	got := &corev1.PodTemplateSpec{}
	g.Expect(jsonconv.Convert(d.Spec.Template, got)).To(Succeed())
	g.Expect(got.Spec.NodeSelector).To(Equal(map[string]string{"pool": "cache"}))
	g.Expect(got.Spec.Affinity).To(Equal(&corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"cache", "general"}}},
		}}},
	}}))
	g.Expect(got.Spec.Tolerations).To(Equal([]corev1.Toleration{
		{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cache", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
	}))
	g.Expect(got.Spec.TopologySpreadConstraints).To(Equal([]corev1.TopologySpreadConstraint{{
		MaxSkew: 2, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": "cache"}},
		MinDomains:    ptr.To[int32](3),
	}}), "set: replaces the default spreading")
}

// The scheduling types of the API are the core API's, field for field:
// every JSON field of the core type is one of ours, so nothing a user
// copies from a pod's spec is dropped or refused as unknown.
func TestSchedulingTypesHaveEveryCoreField(t *testing.T) {
	pairs := []struct{ ours, core reflect.Type }{
		{reflect.TypeFor[cachev1alpha1.Toleration](), reflect.TypeFor[corev1.Toleration]()},
		{reflect.TypeFor[cachev1alpha1.TopologySpreadConstraint](), reflect.TypeFor[corev1.TopologySpreadConstraint]()},
		{reflect.TypeFor[cachev1alpha1.LabelSelector](), reflect.TypeFor[metav1.LabelSelector]()},
		{reflect.TypeFor[cachev1alpha1.LabelSelectorRequirement](), reflect.TypeFor[metav1.LabelSelectorRequirement]()},
		{reflect.TypeFor[cachev1alpha1.Affinity](), reflect.TypeFor[corev1.Affinity]()},
		{reflect.TypeFor[cachev1alpha1.NodeAffinity](), reflect.TypeFor[corev1.NodeAffinity]()},
		{reflect.TypeFor[cachev1alpha1.NodeSelector](), reflect.TypeFor[corev1.NodeSelector]()},
		{reflect.TypeFor[cachev1alpha1.NodeSelectorTerm](), reflect.TypeFor[corev1.NodeSelectorTerm]()},
		{reflect.TypeFor[cachev1alpha1.NodeSelectorRequirement](), reflect.TypeFor[corev1.NodeSelectorRequirement]()},
		{reflect.TypeFor[cachev1alpha1.PreferredSchedulingTerm](), reflect.TypeFor[corev1.PreferredSchedulingTerm]()},
		{reflect.TypeFor[cachev1alpha1.PodAffinity](), reflect.TypeFor[corev1.PodAffinity]()},
		{reflect.TypeFor[cachev1alpha1.PodAffinity](), reflect.TypeFor[corev1.PodAntiAffinity]()},
		{reflect.TypeFor[cachev1alpha1.PodAffinityTerm](), reflect.TypeFor[corev1.PodAffinityTerm]()},
		{reflect.TypeFor[cachev1alpha1.WeightedPodAffinityTerm](), reflect.TypeFor[corev1.WeightedPodAffinityTerm]()},
	}
	jsonNames := func(t reflect.Type) []string {
		var names []string
		for f := range t.Fields() {
			names = append(names, strings.Split(f.Tag.Get("json"), ",")[0])
		}
		return names
	}
	for _, p := range pairs {
		t.Run(p.core.Name(), func(t *testing.T) {
			NewWithT(t).Expect(jsonNames(p.ours)).To(ConsistOf(jsonNames(p.core)))
		})
	}
}
