package owned_test

import (
	"encoding/json"
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
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/status"
)

func entry(t *testing.T, manager string, op metav1.ManagedFieldsOperationType, subresource string, s *fieldpath.Set) metav1.ManagedFieldsEntry {
	t.Helper()
	raw, err := s.ToJSON()
	if err != nil {
		t.Fatal(err)
	}
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: subresource, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw}}
}

// applied returns the object the apiserver would hold after the operator
// applied want as manager (on subresource), with entries of other managers
// added: the fields want sets, and managed fields saying so.
func applied[T client.Object](t *testing.T, want runtime.ApplyConfiguration, into T, manager, subresource string, others ...metav1.ManagedFieldsEntry) T {
	t.Helper()
	raw, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatal(err)
	}
	var fields *fieldpath.Set
	if _, ok := any(into).(*cachev1alpha1.Memcached); ok {
		fields, err = memcachedFields(want)
	} else {
		fields, err = owned.AppliedFields(builtin, want)
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
	return owned.AppliedFields(applyconfig.NewTypeConverter(scheme), want)
}

func testMemcached() *cachev1alpha1.Memcached {
	return &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1", Generation: 2},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2), Threads: ptr.To[int32](4)},
	}
}

func withNodeSelector(m *cachev1alpha1.Memcached) *cachev1alpha1.Memcached {
	m = m.DeepCopy()
	m.Spec.NodeSelector = map[string]cachev1alpha1.LabelValue{"disk": "ssd"}
	return m
}

func TestStatefulSetSummaryKeepsWhatTheControllerReads(t *testing.T) {
	g := NewWithT(t)
	m := testMemcached()
	want := desired.StatefulSet(m, desired.Images{Memcached: "memcached:1"}, desired.SecretDigests{})
	other := entry(t, "argocd-controller", metav1.ManagedFieldsOperationApply, "",
		fieldpath.NewSet(fieldpath.MakePathOrDie("metadata", "annotations", "team")))
	whole := applied(t, want, &appsv1.StatefulSet{}, owned.FieldManager, "", other)
	whole.ResourceVersion, whole.Generation = "17", 3
	whole.Annotations = map[string]string{"team": "payments", "kubectl.kubernetes.io/last-applied-configuration": "{}"}
	whole.Status = appsv1.StatefulSetStatus{
		ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
		CurrentRevision: "cache-5d8f", UpdateRevision: "cache-5d8f",
	}

	s, err := owned.Summarize(whole.DeepCopy(), builtin)
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(s.Kind()).To(Equal(owned.KindStatefulSet))
	g.Expect(s.APIVersion).To(Equal("apps/v1"), "the kind is known, for events that name the object")
	g.Expect(s.Name).To(Equal(whole.Name))
	g.Expect(s.ResourceVersion).To(Equal("17"))
	g.Expect(s.Generation).To(Equal(int64(3)))
	g.Expect(metav1.IsControlledBy(s, m)).To(BeTrue(), "the controller reference is kept")
	g.Expect(s.Replicas).To(Equal(ptr.To[int32](2)))
	g.Expect(s.Labels).To(BeEmpty())
	g.Expect(s.Annotations).To(BeEmpty())
	g.Expect(s.ManagedFields).To(HaveLen(1), "only the operator's entry")
	g.Expect(s.ManagedFields[0].Manager).To(Equal(owned.FieldManager))
	g.Expect(s.LastApplied()).To(Equal(whole.ManagedFields[0].Time), "its time tells when the operator applied")
	g.Expect(s.ManagedFields[0].FieldsV1).To(BeNil())
	g.Expect(s.Status).To(Equal(whole.Status))
	g.Expect(s.Digest).NotTo(BeNil())

	observed, err := owned.SummarizeAnswer(whole)
	g.Expect(err).NotTo(HaveOccurred())
	now := metav1.Now()
	g.Expect(status.Status(m, status.Observation{StatefulSet: s}, now)).
		To(Equal(status.Status(m, status.Observation{StatefulSet: observed}, now)), "the status reads nothing the digest changes")

	tests := []struct {
		name             string
		want             runtime.ApplyConfiguration
		nothing, exactly bool
	}{
		{"what was applied", desired.StatefulSet(m, desired.Images{Memcached: "memcached:1"}, desired.SecretDigests{}), true, true},
		{"another image: same fields, new value", desired.StatefulSet(m, desired.Images{Memcached: "memcached:2"}, desired.SecretDigests{}), false, true},
		{"a field added", desired.StatefulSet(withNodeSelector(m), desired.Images{Memcached: "memcached:1"}, desired.SecretDigests{}), false, false},
	}
	for _, tt := range tests {
		nothing, err := s.AppliesNothing(tt.want)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nothing).To(Equal(tt.nothing), "%s: applies nothing", tt.name)
		exactly, err := s.OwnsExactly(tt.want, builtin)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(exactly).To(Equal(tt.exactly), "%s: owns exactly its fields", tt.name)
	}
}

func TestFieldsTakenByAnotherManagerAreNotOwnedExactly(t *testing.T) {
	g := NewWithT(t)
	m := testMemcached()
	want := desired.StatefulSet(m, desired.Images{Memcached: "memcached:1"}, desired.SecretDigests{})
	fields, err := owned.AppliedFields(builtin, want)
	g.Expect(err).NotTo(HaveOccurred())
	replicas := fieldpath.NewSet(fieldpath.MakePathOrDie("spec", "replicas"))
	whole := applied(t, want, &appsv1.StatefulSet{}, owned.FieldManager, "")
	whole.ManagedFields = []metav1.ManagedFieldsEntry{
		entry(t, owned.FieldManager, metav1.ManagedFieldsOperationApply, "", fields.Difference(replicas)),
		entry(t, "kubectl", metav1.ManagedFieldsOperationUpdate, "scale", replicas),
	}
	s, err := owned.Summarize(whole, builtin)
	g.Expect(err).NotTo(HaveOccurred())
	exactly, err := s.OwnsExactly(want, builtin)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exactly).To(BeFalse(), "kubectl scale took spec.replicas")
	nothing, err := s.AppliesNothing(want)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nothing).To(BeFalse(), "spec.replicas must be applied again")
}

func TestServiceSummaryKeepsPorts(t *testing.T) {
	g := NewWithT(t)
	m := testMemcached()
	want := desired.Service(m, false)
	whole := applied(t, want, &corev1.Service{}, owned.FieldManager, "")
	whole.Spec.SessionAffinity = corev1.ServiceAffinityNone
	s, err := owned.Summarize(whole, builtin)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Kind()).To(Equal(owned.KindService))
	g.Expect(s.Ports).To(Equal(whole.Spec.Ports))
	g.Expect(s.Status).To(BeZero(), "a Service has no StatefulSet status")
	nothing, err := s.AppliesNothing(want)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nothing).To(BeTrue())
}

func TestASummaryWithoutDigestComparesAsAnError(t *testing.T) {
	g := NewWithT(t)
	m := testMemcached()
	whole := applied(t, desired.StatefulSet(m, desired.Images{Memcached: "memcached:1"}, desired.SecretDigests{}), &appsv1.StatefulSet{}, owned.FieldManager, "")
	whole.ManagedFields[0].FieldsV1 = &metav1.FieldsV1{Raw: []byte(`{"bogus":{}}`)}
	s, err := owned.Summarize(whole, builtin)
	g.Expect(err).NotTo(HaveOccurred(), "the store keeps it, and reconciling it reports why")
	g.Expect(s.Digest).To(BeNil())
	_, err = s.AppliesNothing(desired.StatefulSet(m, desired.Images{Memcached: "memcached:1"}, desired.SecretDigests{}))
	g.Expect(err).To(MatchError(ContainSubstring("no digest of StatefulSet ns/cache")))

	observed, err := owned.SummarizeAnswer(whole)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = observed.AppliesNothing(desired.StatefulSet(m, desired.Images{Memcached: "memcached:1"}, desired.SecretDigests{}))
	g.Expect(err).To(HaveOccurred(), "an apply's answer is never compared")
}

func TestOnlyOwnedKindsAreSummarized(t *testing.T) {
	_, err := owned.Summarize(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, builtin)
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("no summary for *v1.Secret")))
}

func TestMemcachedStatusComparesFromTheOperatorsEntryAlone(t *testing.T) {
	g := NewWithT(t)
	m := testMemcached()
	earlier := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	want := cacheac.Memcached(m.Name, m.Namespace).WithStatus(status.Status(m, status.Observation{}, earlier))
	whole := applied(t, want, m.DeepCopy(), owned.StatusFieldManager, "status",
		entry(t, "kubectl-client-side-apply", metav1.ManagedFieldsOperationUpdate, "",
			fieldpath.NewSet(fieldpath.MakePathOrDie("spec", "size"))))
	whole.Spec = m.Spec
	whole.Labels = map[string]string{"team": "payments"}
	g.Expect(whole.Status.Conditions).NotTo(BeEmpty())

	out, err := owned.KeepStatusManagerEntry(whole.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	cached := out.(*cachev1alpha1.Memcached)
	g.Expect(cached.ManagedFields).To(HaveLen(1))
	g.Expect(cached.ManagedFields[0].Manager).To(Equal(owned.StatusFieldManager))
	cached.ManagedFields = whole.ManagedFields
	g.Expect(cached).To(Equal(whole), "only other managers' entries are dropped")

	// The next status is computed alike, and found already there.
	cached, _ = (func() (*cachev1alpha1.Memcached, error) {
		o, err := owned.KeepStatusManagerEntry(whole.DeepCopy())
		return o.(*cachev1alpha1.Memcached), err
	})()
	now := metav1.NewTime(earlier.Add(time.Hour))
	next := cacheac.Memcached(m.Name, m.Namespace).WithStatus(status.Status(cached, status.Observation{}, now))
	nothing, err := owned.StatusAppliesNothing(cached, next)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nothing).To(BeTrue(), "unchanged conditions keep their time, so the status is the same")

	scaled := cached.DeepCopy()
	scaled.Generation++
	next = cacheac.Memcached(m.Name, m.Namespace).WithStatus(status.Status(scaled, status.Observation{}, now))
	nothing, err = owned.StatusAppliesNothing(scaled, next)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nothing).To(BeFalse(), "a new generation is a new status")
}

func TestOtherObjectsPassTheMemcachedTransformUnchanged(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	out, err := owned.KeepStatusManagerEntry(cm.DeepCopy())
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(cm))
}
