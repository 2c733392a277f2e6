package memcached

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/applyconfig"
	cacheac "github.com/example/memcached-operator/applyconfig/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/status"
)

// applied returns the object the apiserver would hold after the operator
// applied want as manager (on subresource), with entries of other managers
// added: the fields want sets, and managed fields saying so.
func applied[T client.Object](t *testing.T, want runtime.ApplyConfiguration, into T, manager, subresource string, others ...metav1.ManagedFieldsEntry) T {
	t.Helper()
	if err := convert(want, into); err != nil {
		t.Fatal(err)
	}
	var fields *fieldpath.Set
	var err error
	if _, ok := any(into).(*cachev1alpha1.Memcached); ok {
		fields, err = memcachedFields(want)
	} else {
		fields, err = appliedFields(want)
	}
	if err != nil {
		t.Fatal(err)
	}
	e := entry(t, manager, metav1.ManagedFieldsOperationApply, subresource, fields)
	e.Time = &metav1.Time{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	into.SetManagedFields(append([]metav1.ManagedFieldsEntry{e}, others...))
	return into
}

// memcachedFields are the leaf field paths an apply configuration of a
// Memcached sets.
func memcachedFields(want runtime.ApplyConfiguration) (*fieldpath.Set, error) {
	scheme := runtime.NewScheme()
	if err := cachev1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return appliedFieldsOf(applyconfig.NewTypeConverter(scheme), want)
}

func testMemcached() *cachev1alpha1.Memcached {
	return &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1", Generation: 2},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2), Threads: ptr.To[int32](4)},
	}
}

func TestDeploymentSummaryKeepsWhatTheControllerReads(t *testing.T) {
	g := NewWithT(t)
	m := testMemcached()
	want := desired.Deployment(m, "memcached:1")
	other := entry(t, "argocd-controller", metav1.ManagedFieldsOperationApply, "",
		fieldpath.NewSet(fieldpath.MakePathOrDie("metadata", "annotations", "team")))
	whole := applied(t, want, &appsv1.Deployment{}, FieldManager, "", other)
	whole.ResourceVersion, whole.Generation = "17", 3
	whole.Annotations = map[string]string{"team": "payments", "kubectl.kubernetes.io/last-applied-configuration": "{}"}
	whole.Status = appsv1.DeploymentStatus{
		ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Message: "Deployment has minimum availability."}},
	}

	out, err := trim(whole.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	s := out.(*appsv1.Deployment)

	g.Expect(s.Name).To(Equal(whole.Name))
	g.Expect(s.ResourceVersion).To(Equal("17"))
	g.Expect(s.Generation).To(Equal(int64(3)))
	g.Expect(metav1.IsControlledBy(s, m)).To(BeTrue(), "the controller reference is kept")
	g.Expect(s.Spec.Replicas).To(Equal(ptr.To[int32](2)))
	g.Expect(s.Spec.Template.Spec.Containers).To(BeEmpty(), "the pod template is dropped")
	g.Expect(s.Labels).To(BeEmpty())
	g.Expect(s.Annotations).To(HaveLen(1), "only the digest: %v", s.Annotations)
	g.Expect(s.ManagedFields).To(HaveLen(1), "only the operator's entry")
	g.Expect(s.ManagedFields[0].Manager).To(Equal(FieldManager))
	g.Expect(s.ManagedFields[0].Time).To(Equal(whole.ManagedFields[0].Time), "its time tells when the operator applied")
	g.Expect(s.ManagedFields[0].FieldsV1).To(BeNil())
	g.Expect(s.Status).To(Equal(whole.Status))

	// The controller's conclusions are the same on the summary.
	now := metav1.Now()
	g.Expect(status.Status(m, status.Observation{Deployment: s}, now)).
		To(Equal(status.Status(m, status.Observation{Deployment: whole}, now)))
	g.Expect(reportPending(s, false, now.Time)).To(Equal(reportPending(whole, false, now.Time)))

	tests := []struct {
		name             string
		want             runtime.ApplyConfiguration
		nothing, exactly bool
	}{
		{"what was applied", desired.Deployment(m, "memcached:1"), true, true},
		{"another image: same fields, new value", desired.Deployment(m, "memcached:2"), false, true},
		{"a field added", desired.Deployment(withNodeSelector(m), "memcached:1"), false, false},
	}
	for _, tt := range tests {
		nothing, err := appliesNothing(s, tt.want)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nothing).To(Equal(tt.nothing), "%s: applies nothing", tt.name)
		exactly, err := ownsExactly(s, tt.want)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(exactly).To(Equal(tt.exactly), "%s: owns exactly its fields", tt.name)

		fromWhole, err := appliesNothing(whole, tt.want)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fromWhole).To(Equal(nothing), "%s: the whole object gives the same answer", tt.name)
	}
}

func withNodeSelector(m *cachev1alpha1.Memcached) *cachev1alpha1.Memcached {
	m = m.DeepCopy()
	m.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	return m
}

func TestFieldsTakenByAnotherManagerAreNotOwnedExactly(t *testing.T) {
	g := NewWithT(t)
	m := testMemcached()
	want := desired.Deployment(m, "memcached:1")
	fields, err := appliedFields(want)
	g.Expect(err).NotTo(HaveOccurred())
	replicas := fieldpath.NewSet(fieldpath.MakePathOrDie("spec", "replicas"))
	whole := &appsv1.Deployment{}
	g.Expect(convert(want, whole)).To(Succeed())
	whole.ManagedFields = []metav1.ManagedFieldsEntry{
		entry(t, FieldManager, metav1.ManagedFieldsOperationApply, "", fields.Difference(replicas)),
		entry(t, "kubectl", metav1.ManagedFieldsOperationUpdate, "scale", replicas),
	}
	s, err := summarize(whole)
	g.Expect(err).NotTo(HaveOccurred())
	exactly, err := ownsExactly(s, want)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exactly).To(BeFalse(), "kubectl scale took spec.replicas")
	nothing, err := appliesNothing(s, want)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nothing).To(BeFalse(), "spec.replicas must be applied again")
}

func TestServiceSummaryKeepsPorts(t *testing.T) {
	g := NewWithT(t)
	m := testMemcached()
	want := desired.Service(m)
	whole := applied(t, want, &corev1.Service{}, FieldManager, "")
	whole.Spec.SessionAffinity = corev1.ServiceAffinityNone
	s, err := summarize(whole)
	g.Expect(err).NotTo(HaveOccurred())
	svc := s.(*corev1.Service)
	g.Expect(svc.Spec.Ports).To(Equal(whole.Spec.Ports))
	g.Expect(svc.Spec.SessionAffinity).To(BeEmpty())
	now := metav1.Now()
	g.Expect(status.Status(m, status.Observation{Service: svc}, now)).
		To(Equal(status.Status(m, status.Observation{Service: whole}, now)))
	nothing, err := appliesNothing(svc, want)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nothing).To(BeTrue())
}

func TestMemcachedSummaryKeepsSpecAndConditionTimes(t *testing.T) {
	g := NewWithT(t)
	m := testMemcached()
	earlier := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := status.Status(m, status.Observation{}, earlier)
	want := cacheac.Memcached(m.Name, m.Namespace).WithStatus(st)
	whole := applied(t, want, m.DeepCopy(), StatusFieldManager, "status",
		entry(t, "kubectl-client-side-apply", metav1.ManagedFieldsOperationUpdate, "",
			fieldpath.NewSet(fieldpath.MakePathOrDie("spec", "size"))))
	whole.Spec = m.Spec
	g.Expect(whole.Status.Conditions).NotTo(BeEmpty())

	s, err := summarize(whole)
	g.Expect(err).NotTo(HaveOccurred())
	sm := s.(*cachev1alpha1.Memcached)
	g.Expect(sm.Spec).To(Equal(whole.Spec))
	g.Expect(sm.Generation).To(Equal(whole.Generation))
	g.Expect(sm.Status.Conditions).To(HaveLen(len(whole.Status.Conditions)))
	for i, c := range sm.Status.Conditions {
		g.Expect(c.Message).To(BeEmpty())
		g.Expect(c.Type).To(Equal(whole.Status.Conditions[i].Type))
		g.Expect(c.LastTransitionTime).To(Equal(whole.Status.Conditions[i].LastTransitionTime))
	}
	g.Expect(sm.ManagedFields).To(HaveLen(1))
	g.Expect(sm.ManagedFields[0].Manager).To(Equal(StatusFieldManager))

	// The next status is computed alike, and found already there.
	now := metav1.NewTime(earlier.Add(time.Hour))
	next := cacheac.Memcached(m.Name, m.Namespace).WithStatus(status.Status(sm, status.Observation{}, now))
	g.Expect(next).To(Equal(cacheac.Memcached(m.Name, m.Namespace).WithStatus(status.Status(whole, status.Observation{}, now))))
	nothing, err := appliesNothing(sm, next)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nothing).To(BeTrue(), "unchanged conditions keep their time, so the status is the same")
}

func TestSummaryDigestIsComputedNotTrustedOnAWholeObject(t *testing.T) {
	g := NewWithT(t)
	m := testMemcached()
	whole := applied(t, desired.Deployment(m, "memcached:1"), &appsv1.Deployment{}, FieldManager, "")
	forged := (ownedDigest{values: 1, fields: 2}).String()
	whole.Annotations = map[string]string{digestAnnotation: forged}

	nothing, err := appliesNothing(whole, desired.Deployment(m, "memcached:1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nothing).To(BeTrue(), "the digest of an object with field sets is computed from them")
	s, err := summarize(whole)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.GetAnnotations()[digestAnnotation]).NotTo(Equal(forged))
}

func TestOtherObjectsAreCachedWhole(t *testing.T) {
	g := NewWithT(t)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Labels: map[string]string{"team": "payments"}},
		Data:       map[string]string{"k": "v"},
	}
	out, err := trim(cm.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(cm))
}
