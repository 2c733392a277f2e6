package owned

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/example/memcached-operator/pkg/desired"
)

// A pod the operator patched is seen as patched until the store's watch
// shows the patch or a later version, and then as the watch shows it: a
// reconcile in between does not patch it again.
func TestAPodPatchIsSeenBeforeTheWatchShowsIt(t *testing.T) {
	g := NewWithT(t)
	s, _ := storeWithoutWatch()
	inf := newPodInformer(fake.NewClientset().CoreV1().RESTClient(), metav1.NamespaceAll, labels.Everything())
	s.add(s.informers, kindPod, metav1.NamespaceAll, inf)
	watch := inf.GetIndexer()
	pod := func(rv, version string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "cache-0", UID: "pod", ResourceVersion: rv,
			Annotations:     map[string]string{desired.AnnotationMembershipVersion: version},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "cache", UID: "set", Controller: ptr.To(true)}},
		}}
	}
	told := func() string {
		pods, err := s.Pods("ns", "set")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods).To(HaveLen(1))
		return pods[0].MembershipVersion
	}
	g.Expect(watch.Add(SummarizePod(pod("5", "1")))).To(Succeed())
	g.Expect(told()).To(Equal("1"))

	s.RememberPatched(pod("7", "2"))
	g.Expect(told()).To(Equal("2"), "the patch's answer while the watch shows an older version")
	g.Expect(watch.Update(SummarizePod(pod("6", "1")))).To(Succeed()) // another's write, before the patch
	g.Expect(told()).To(Equal("2"))

	g.Expect(watch.Update(SummarizePod(pod("8", "3")))).To(Succeed())
	g.Expect(told()).To(Equal("3"), "the watch's once it shows the patch's version or a later one")
	g.Expect(s.patched).To(BeEmpty())
}

// A pod the operator deleted is seen as being deleted until the watch
// shows a later version of it: a reconcile in between does not delete it
// again.
func TestAPodDeletedIsSeenDeletingBeforeTheWatchShowsIt(t *testing.T) {
	g := NewWithT(t)
	s, _ := storeWithoutWatch()
	inf := newPodInformer(fake.NewClientset().CoreV1().RESTClient(), metav1.NamespaceAll, labels.Everything())
	s.add(s.informers, kindPod, metav1.NamespaceAll, inf)
	watch := inf.GetIndexer()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "cache-0", UID: "pod", ResourceVersion: "5",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "cache", UID: "set", Controller: ptr.To(true)}},
	}}
	deleting := func() bool {
		pods, err := s.Pods("ns", "set")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods).To(HaveLen(1))
		return pods[0].Deleting
	}
	g.Expect(watch.Add(SummarizePod(pod))).To(Succeed())
	s.RememberDeleted(SummarizePod(pod))
	g.Expect(deleting()).To(BeTrue(), "the version deleted, as the watch still shows it")
	now := metav1.Now()
	pod.ResourceVersion, pod.DeletionTimestamp = "6", &now
	g.Expect(watch.Update(SummarizePod(pod))).To(Succeed())
	g.Expect(deleting()).To(BeTrue(), "the watch's")
	g.Expect(s.patched).To(BeEmpty())
}
