package owned

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// A store whose Deployment informer is never started: the test plays its
// watch by writing to the indexer and calling the handler, in the order an
// informer does (indexer first).
func storeWithoutWatch() (*Store, toolscache.Indexer) {
	s := &Store{
		informers: map[Kind]map[string]toolscache.SharedIndexInformer{},
		applied:   map[appliedKey]applied{},
		kept:      map[types.UID]keptAs{},
		patched:   map[types.UID]patched{},
	}
	inf := newInformer(&toolscache.ListWatch{}, &Summary{}, "test", 0, nil)
	s.add(s.informers, KindDeployment, metav1.NamespaceAll, inf)
	return s, inf.GetIndexer()
}

func deploymentAt(rv string, digest Digest) *Summary {
	return &Summary{
		TypeMeta:   metav1.TypeMeta{Kind: string(KindDeployment)},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache", UID: "u", ResourceVersion: rv},
		Digest:     &digest,
	}
}

var cacheKey = types.NamespacedName{Namespace: "ns", Name: "cache"}

func getDeployment(g Gomega, s *Store) *Summary {
	sum, found, err := s.Get(KindDeployment, cacheKey)
	g.Expect(err).NotTo(HaveOccurred())
	if !found {
		return nil
	}
	return sum
}

func TestAnApplyIsSeenBeforeTheWatchShowsIt(t *testing.T) {
	g := NewWithT(t)
	s, watch := storeWithoutWatch()
	created, changed := Digest{Values: 1}, Digest{Values: 2}

	// Created: the store has not seen it yet, Get has the apply's answer.
	s.RememberApplied(nil, deploymentAt("5", Digest{}), created)
	g.Expect(getDeployment(g, s)).NotTo(BeNil())
	g.Expect(*getDeployment(g, s).Digest).To(Equal(created), "the digest of what was applied")
	g.Expect(getDeployment(g, s).LastApplied()).NotTo(BeNil(), "the time of the apply")

	// The watch shows it: the store's own from then on.
	g.Expect(watch.Add(deploymentAt("5", created))).To(Succeed())
	s.seen(deploymentAt("5", created))
	g.Expect(getDeployment(g, s).ResourceVersion).To(Equal("5"))
	g.Expect(s.applied).To(BeEmpty())

	// Changed: until the watch shows the apply's version or a later one,
	// Get has the apply's answer, resyncs of the old version
	// notwithstanding.
	s.RememberApplied(getDeployment(g, s), deploymentAt("6", Digest{}), changed)
	g.Expect(getDeployment(g, s).ResourceVersion).To(Equal("6"))
	g.Expect(*getDeployment(g, s).Digest).To(Equal(changed))
	s.seen(deploymentAt("5", created)) // a resync
	g.Expect(getDeployment(g, s).ResourceVersion).To(Equal("6"))

	// The indexer holds the next version before the handler hears of it.
	g.Expect(watch.Update(deploymentAt("7", changed))).To(Succeed())
	g.Expect(getDeployment(g, s).ResourceVersion).To(Equal("7"))
	s.seen(deploymentAt("7", changed))
	g.Expect(s.applied).To(BeEmpty())

	// Two applies before the watch shows either: the second's answer,
	// until the watch shows the second's version.
	s.RememberApplied(getDeployment(g, s), deploymentAt("8", Digest{}), created)
	s.RememberApplied(getDeployment(g, s), deploymentAt("9", Digest{}), changed)
	g.Expect(getDeployment(g, s).ResourceVersion).To(Equal("9"))
	g.Expect(*getDeployment(g, s).Digest).To(Equal(changed))
	g.Expect(watch.Update(deploymentAt("9", changed))).To(Succeed())
	s.seen(deploymentAt("9", changed))
	g.Expect(s.applied).To(BeEmpty())

	// A change whose object is deleted before the watch showed the change
	// is gone: the record does not bring it back.
	s.RememberApplied(getDeployment(g, s), deploymentAt("10", Digest{}), changed)
	g.Expect(watch.Delete(deploymentAt("9", changed))).To(Succeed())
	g.Expect(getDeployment(g, s)).To(BeNil())
}

func TestAnApplyTheWatchShowedFirstIsNotRecorded(t *testing.T) {
	g := NewWithT(t)
	s, watch := storeWithoutWatch()
	g.Expect(watch.Add(deploymentAt("6", Digest{Values: 2}))).To(Succeed())
	s.RememberApplied(deploymentAt("5", Digest{}), deploymentAt("6", Digest{}), Digest{Values: 2})
	g.Expect(s.applied).To(BeEmpty())
	g.Expect(watch.Update(deploymentAt("7", Digest{Values: 3}))).To(Succeed())
	g.Expect(*getDeployment(g, s).Digest).To(Equal(Digest{Values: 3}))
}

// Another's write that lands between the store's read and the apply (the
// status the StatefulSet controller writes while the pods' readiness
// changes) is not the apply: the watch shows it first, and Get still has
// the apply's answer until the watch shows that, resyncs notwithstanding.
func TestAWriteOfAnotherBeforeTheApplyDoesNotHideIt(t *testing.T) {
	g := NewWithT(t)
	s, watch := storeWithoutWatch()
	before, applied := Digest{Values: 1}, Digest{Values: 2}
	g.Expect(watch.Add(deploymentAt("5", before))).To(Succeed())
	s.seen(deploymentAt("5", before))
	over := getDeployment(g, s)

	g.Expect(watch.Update(deploymentAt("6", before))).To(Succeed())
	s.seen(deploymentAt("6", before))
	s.RememberApplied(over, deploymentAt("7", Digest{}), applied)
	g.Expect(getDeployment(g, s).ResourceVersion).To(Equal("7"))
	g.Expect(*getDeployment(g, s).Digest).To(Equal(applied), "the apply, not the write before it")
	s.seen(deploymentAt("6", before)) // a resync
	g.Expect(*getDeployment(g, s).Digest).To(Equal(applied))

	g.Expect(watch.Update(deploymentAt("7", applied))).To(Succeed())
	s.seen(deploymentAt("7", applied))
	g.Expect(s.applied).To(BeEmpty())
	g.Expect(watch.Update(deploymentAt("8", before))).To(Succeed())
	g.Expect(*getDeployment(g, s).Digest).To(Equal(before), "a later change is not hidden")
}
