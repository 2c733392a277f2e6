package desired

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

func memcached(name string, spec cachev1alpha1.MemcachedSpec) *cachev1alpha1.Memcached {
	return &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "uid-1"},
		Spec:       spec,
	}
}

func TestDeployment(t *testing.T) {
	tests := []struct {
		name         string
		m            *cachev1alpha1.Memcached
		wantReplicas int32
		wantImage    string
		wantCommand  []string
		wantPort     int32
		wantLimits   corev1.ResourceList
	}{
		{
			name:         "defaults",
			m:            memcached("cache", cachev1alpha1.MemcachedSpec{}),
			wantReplicas: 1,
			wantImage:    "memcached:default",
			wantCommand:  []string{"memcached", "--port=11211"},
			wantPort:     11211,
		},
		{
			name: "every setting",
			m: memcached("cache", cachev1alpha1.MemcachedSpec{
				Size: ptr.To[int32](3), ContainerPort: ptr.To[int32](11311), Image: "memcached:1.6.38",
				MemoryLimitMiB: ptr.To[int32](128), MaxConnections: ptr.To[int32](2048), Threads: ptr.To[int32](2),
				Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
			}),
			wantReplicas: 3,
			wantImage:    "memcached:1.6.38",
			wantCommand:  []string{"memcached", "--port=11311", "--memory-limit=128", "--conn-limit=2048", "--threads=2"},
			wantPort:     11311,
			wantLimits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
		{
			name:         "size zero",
			m:            memcached("cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](0)}),
			wantReplicas: 0,
			wantImage:    "memcached:default",
			wantCommand:  []string{"memcached", "--port=11211"},
			wantPort:     11211,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			d := StatefulSet(tt.m, Images{Memcached: "memcached:default"}, SecretDigests{})

			g.Expect(*d.Name).To(Equal(tt.m.Name))
			g.Expect(*d.Namespace).To(Equal(tt.m.Namespace))
			g.Expect(*d.Spec.Replicas).To(Equal(tt.wantReplicas))
			g.Expect(d.OwnerReferences).To(HaveLen(1))
			g.Expect(*d.OwnerReferences[0].UID).To(BeEquivalentTo("uid-1"))
			g.Expect(*d.OwnerReferences[0].Controller).To(BeTrue())

			pod := d.Spec.Template.Spec
			g.Expect(pod.Containers).To(HaveLen(1))
			c := pod.Containers[0]
			g.Expect(*c.Image).To(Equal(tt.wantImage))
			g.Expect(c.Command).To(Equal(tt.wantCommand))
			g.Expect(c.Ports).To(HaveLen(1))
			g.Expect(*c.Ports[0].ContainerPort).To(Equal(tt.wantPort))
			g.Expect(*c.Ports[0].Name).To(Equal(PortName))
			g.Expect(c.ReadinessProbe.TCPSocket.Port.StrVal).To(Equal(PortName))
			g.Expect(c.LivenessProbe.TCPSocket.Port.StrVal).To(Equal(PortName))
			if tt.wantLimits == nil {
				g.Expect(c.Resources).To(BeNil(), "no resources are sent when the spec has none")
			} else {
				g.Expect(*c.Resources.Limits).To(Equal(tt.wantLimits))
			}
		})
	}
}

func TestDeploymentIsRestricted(t *testing.T) {
	g := NewWithT(t)
	pod := StatefulSet(memcached("cache", cachev1alpha1.MemcachedSpec{}), Images{Memcached: "memcached"}, SecretDigests{}).Spec.Template.Spec
	g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(*pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	sc := pod.Containers[0].SecurityContext
	g.Expect(*sc.RunAsNonRoot).To(BeTrue())
	g.Expect(*sc.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(sc.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
	g.Expect(sc.Capabilities.Add).To(BeEmpty())
	g.Expect(sc.Privileged).To(BeNil())
}

func TestSelectorMatchesPodsAndNeverChanges(t *testing.T) {
	g := NewWithT(t)
	a := memcached("cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), Image: "memcached:1"})
	b := memcached("cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](5), Image: "memcached:2", Threads: ptr.To[int32](8)})
	da, db := StatefulSet(a, Images{Memcached: "x"}, SecretDigests{}), StatefulSet(b, Images{Memcached: "y"}, SecretDigests{})
	g.Expect(da.Spec.Selector.MatchLabels).To(Equal(db.Spec.Selector.MatchLabels), "a spec change must not change the immutable selector")
	sel := labels.SelectorFromSet(da.Spec.Selector.MatchLabels)
	g.Expect(sel.Matches(labels.Set(da.Spec.Template.Labels))).To(BeTrue())

	other := StatefulSet(memcached("cache-2", cachev1alpha1.MemcachedSpec{}), Images{Memcached: "x"}, SecretDigests{})
	g.Expect(sel.Matches(labels.Set(other.Spec.Template.Labels))).To(BeFalse(), "selectors of two instances must not overlap")
}

func TestInstanceLabelValue(t *testing.T) {
	long := strings.Repeat("a", 253)
	dotted := strings.Repeat("a", 51) + "." + strings.Repeat("b", 100)
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"short name is kept", "cache", "cache"},
		{"63 characters are kept", strings.Repeat("c", 63), strings.Repeat("c", 63)},
		{"long name is shortened", long, ""},
		{"a cut never ends on a dot", dotted, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := instanceLabelValue(tt.in)
			g.Expect(validation.IsValidLabelValue(got)).To(BeEmpty())
			if tt.want != "" {
				g.Expect(got).To(Equal(tt.want))
			}
		})
	}
	t.Run("distinct long names give distinct values", func(t *testing.T) {
		NewWithT(t).Expect(instanceLabelValue(long + "x")).NotTo(Equal(instanceLabelValue(long + "y")))
	})
}

func TestImage(t *testing.T) {
	tests := []struct {
		name, spec, def, want string
	}{
		{"spec wins", "memcached:1.6.38", "memcached:default", "memcached:1.6.38"},
		{"default when unset", "", "memcached:default", "memcached:default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(Images{Memcached: tt.def}.Image(memcached("m", cachev1alpha1.MemcachedSpec{Image: tt.spec}))).To(Equal(tt.want))
		})
	}
}
