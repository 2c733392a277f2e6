//go:build integration

package memcached_test

import (
	"context"
	"fmt"
	"sort"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/owned"
)

func TestServiceSelectsExactlyItsInstancesPods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	// Two Memcacheds in one namespace, one with a name that prefixes the other's.
	alpha := newMemcached(t, ns, "alpha", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)})
	alphaTwo := newMemcached(t, ns, "alpha-two", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3), ContainerPort: ptr.To[int32](11311)})

	for _, m := range []*cachev1alpha1.Memcached{alpha, alphaTwo} {
		got, _ := converged(t, m)
		port := *got.Spec.ContainerPort
		g.Expect(got.Status.Service).To(Equal(&cachev1alpha1.ServiceStatus{
			Name: m.Name, Port: port, Address: fmt.Sprintf("%s.%s.svc:%d", m.Name, ns, port),
		}), "status tells clients where to connect")

		svc := &corev1.Service{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), svc)).To(Succeed())
		g.Expect(metav1.IsControlledBy(svc, got)).To(BeTrue())
		g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone), "headless: the name resolves to every pod")
		g.Expect(svc.Spec.Ports).To(HaveLen(1))
		g.Expect(svc.Spec.Ports[0].Name).To(Equal("memcached"))
		g.Expect(svc.Spec.Ports[0].Port).To(Equal(port))

		// The endpoint controllers publish exactly this instance's ready pods.
		g.Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(desired.SelectorLabels(got)))).To(Succeed())
			var want []string
			for _, p := range pods.Items {
				if p.DeletionTimestamp.IsZero() {
					want = append(want, p.Name)
				}
			}
			g.Expect(want).To(HaveLen(int(*got.Spec.Size)))

			slices := &discoveryv1.EndpointSliceList{}
			g.Expect(k8s.List(ctx, slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: m.Name})).To(Succeed())
			var published []string
			for _, s := range slices.Items {
				for _, p := range s.Ports {
					g.Expect(*p.Port).To(Equal(port))
				}
				for _, e := range s.Endpoints {
					g.Expect(e.TargetRef).NotTo(BeNil())
					if ptr.Deref(e.Conditions.Ready, false) {
						published = append(published, e.TargetRef.Name)
					}
				}
			}
			sort.Strings(want)
			sort.Strings(published)
			g.Expect(published).To(Equal(want))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	}
}

func TestPodDisruptionBudgetFollowsSize(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)})
	m, _ = converged(t, m)

	pdb := &policyv1.PodDisruptionBudget{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), pdb)).To(Succeed())
	g.Expect(metav1.IsControlledBy(pdb, m)).To(BeTrue())
	g.Expect(pdb.Spec.MaxUnavailable).To(Equal(ptr.To(intstr.FromInt32(1))))
	g.Expect(pdb.Spec.Selector.MatchLabels).To(Equal(desired.SelectorLabels(m)))
	first := pdb.UID

	resize := func(size int32) {
		t.Helper()
		g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"size":%d}}`, size)))).To(Succeed())
		m, _ = converged(t, m)
	}

	resize(1)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(m), &policyv1.PodDisruptionBudget{}))
	}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "no budget for a single pod")
	g.Expect(events(t, ns, "cache", "Scaled")).To(ContainElement(HaveField("Note", "Scaled StatefulSet cache from 3 to 1 replicas; updated ConfigMap cache-membership; deleted PodDisruptionBudget cache (size is 1)")),
		"one event tells the scale and the budget's removal")

	resize(2)
	g.Eventually(func(g Gomega) {
		got := &policyv1.PodDisruptionBudget{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(got.UID).NotTo(Equal(first), "a new budget")
		g.Expect(metav1.IsControlledBy(got, m)).To(BeTrue())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	resize(0)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(m), &policyv1.PodDisruptionBudget{}))
	}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "no budget without pods")
}

func TestForeignServiceAndPodDisruptionBudgetAreLeftAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	theirs := map[string]string{"app": "someone-elses"}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: theirs, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: theirs},
		},
	}
	g.Expect(k8s.Create(ctx, svc)).To(Succeed())
	g.Expect(k8s.Create(ctx, pdb)).To(Succeed())

	m := newMemcached(t, ns, "taken", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)})
	g.Eventually(func(g Gomega) {
		got := blockedBy(g, t, m, string(owned.KindService))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue(), "the pods still serve")
		g.Expect(got.Status.Service).To(BeNil(), "not ours: not offered to clients")
		g.Expect(events(t, ns, "taken", "PodDisruptionBudgetNotOwned")).NotTo(BeEmpty())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// Scaled to one, the operator wants no budget: the foreign one stays.
	g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":1}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.ReadyReplicas).To(Equal(int32(1)))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	for _, obj := range []client.Object{&corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "taken"}, obj)).To(Succeed())
		g.Expect(obj.GetOwnerReferences()).To(BeEmpty())
		for _, e := range obj.GetManagedFields() {
			g.Expect(e.Manager).NotTo(Equal(owned.FieldManager))
		}
	}
	written := requests.Since(0, inNamespace(ns), testenv.Wrote, func(r testenv.Request) bool {
		return testenv.PathContains("/services/")(r) || testenv.PathContains("/poddisruptionbudgets/")(r)
	})
	g.Expect(written).To(BeEmpty(), "nothing is written to a Service or budget the operator does not own")

	// Its owner removes the Service: the operator creates its own within the recheck interval.
	g.Expect(k8s.Delete(ctx, svc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, cachev1alpha1.ConditionDegraded)).To(BeTrue())
		g.Expect(got.Status.Service).NotTo(BeNil())
		g.Expect(got.Status.Service.Address).To(Equal("taken." + ns + ".svc:11211"))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

func TestPodsSpreadAcrossNodes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](4)})
	m, _ = converged(t, m)

	nodes := &corev1.NodeList{}
	g.Expect(k8s.List(ctx, nodes)).To(Succeed())
	g.Expect(nodes.Items).To(HaveLen(2), "the local cluster has two nodes")

	pods := &corev1.PodList{}
	g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(desired.SelectorLabels(m)))).To(Succeed())
	perNode := map[string]int{}
	for _, p := range pods.Items {
		perNode[p.Spec.NodeName]++
		// On two empty nodes the scheduler's own default spreading would
		// place them this way too: check that the pods ask for it.
		g.Expect(p.Spec.TopologySpreadConstraints).To(ConsistOf(HaveField("TopologyKey", "kubernetes.io/hostname")))
		g.Expect(p.Spec.TopologySpreadConstraints[0].WhenUnsatisfiable).To(Equal(corev1.ScheduleAnyway))
	}
	g.Expect(perNode).To(HaveLen(2), "pods on both nodes: %v", perNode)
	for node, n := range perNode {
		g.Expect(n).To(Equal(2), "maxSkew 1 over two nodes gives two each: %s has %d", node, n)
	}
}

func TestForeignLabelOnServiceSurvivesAndSchedulingFieldsComeAndGo(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	m := newMemcached(t, ns, "cache", cachev1alpha1.MemcachedSpec{
		Size:         ptr.To[int32](2),
		NodeSelector: map[string]cachev1alpha1.LabelValue{"kubernetes.io/os": "linux"},
		Tolerations:  []cachev1alpha1.Toleration{{Key: "dedicated", Operator: "Equal", Value: "cache", Effect: "NoSchedule"}},
		TopologySpreadConstraints: []cachev1alpha1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "kubernetes.io/os", WhenUnsatisfiable: "ScheduleAnyway",
			LabelSelector: &cachev1alpha1.LabelSelector{MatchLabels: map[string]cachev1alpha1.LabelValue{"app.kubernetes.io/instance": "cache"}},
		}},
	})
	_, dep := converged(t, m)
	ps := dep.Spec.Template.Spec
	g.Expect(ps.NodeSelector).To(Equal(map[string]string{"kubernetes.io/os": "linux"}))
	g.Expect(ps.Tolerations).To(HaveLen(1))
	g.Expect(ps.TopologySpreadConstraints).To(HaveLen(1))
	g.Expect(ps.TopologySpreadConstraints[0].TopologyKey).To(Equal("kubernetes.io/os"))

	// Another manager labels the Service.
	g.Expect(k8s.Apply(ctx, corev1ac.Service("cache", ns).WithLabels(map[string]string{"team": "payments"}),
		client.FieldOwner("policy-engine"))).To(Succeed())

	// The scheduling fields are removed from the spec, and the port changes
	// (the Service is applied again): the fields leave the Deployment, the
	// default spreading returns, the other manager's label stays.
	g.Expect(k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"nodeSelector":null,"tolerations":null,"topologySpreadConstraints":null,"containerPort":11411}}`)))).To(Succeed())
	got, dep := converged(t, m)
	ps = dep.Spec.Template.Spec
	g.Expect(ps.NodeSelector).To(BeEmpty())
	g.Expect(ps.Tolerations).To(BeEmpty())
	g.Expect(ps.TopologySpreadConstraints).To(HaveLen(1))
	g.Expect(ps.TopologySpreadConstraints[0].TopologyKey).To(Equal("kubernetes.io/hostname"))
	g.Eventually(func(g Gomega) {
		svc := &corev1.Service{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), svc)).To(Succeed())
		g.Expect(svc.Spec.Ports).To(HaveLen(1))
		g.Expect(svc.Spec.Ports[0].Port).To(Equal(int32(11411)))
		g.Expect(svc.Labels).To(HaveKeyWithValue("team", "payments"))
		g.Expect(svc.Labels).To(HaveKeyWithValue(desired.LabelManagedBy, desired.ManagedBy))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(got.Status.Service).NotTo(BeNil())
		g.Expect(got.Status.Service.Port).To(Equal(int32(11411)))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}
