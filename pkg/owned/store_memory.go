package owned

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	toolscache "k8s.io/client-go/tools/cache"
)

// keptAs is an apply the apiserver records otherwise than it was sent.
type keptAs struct {
	recorded, applied Digest
}

// RememberNotKept records what an apply that changed nothing tells of the object
// current summarizes: the apiserver keeps the operator's fields of it as
// current's digest says, although applying what has the digest applied
// should have recorded applied. It does not keep some field the operator
// sets (FieldsNotKept names them), or keeps a value otherwise. From then
// on, while the digest of what the operator owns of the object is the
// recorded one, Get gives its summary the applied digest: applying the
// same again would change nothing, and is not sent.
func (s *Store) RememberNotKept(current *Summary, applied Digest) {
	if current.Digest == nil {
		return
	}
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	s.kept[current.UID] = keptAs{recorded: *current.Digest, applied: applied}
}

// asApplied is sum, with the digest of the apply that the apiserver
// records as sum's digest, when RememberNotKept learned one.
func (s *Store) asApplied(sum *Summary) *Summary {
	if sum == nil || sum.Digest == nil {
		return sum
	}
	s.keptMu.Lock()
	k, ok := s.kept[sum.UID]
	s.keptMu.Unlock()
	if !ok || k.recorded != *sum.Digest {
		return sum
	}
	c := sum.DeepCopy()
	c.Digest = &k.applied
	return c
}

// gone forgets what RememberNotKept learned of an object once it is deleted.
func (s *Store) gone(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	sum, ok := obj.(*Summary)
	if !ok {
		return
	}
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	delete(s.kept, sum.UID)
}

// applied is an apply of the controller that the store's watch has not
// shown yet.
type applied struct {
	summary *Summary
	// over is the resourceVersion of the object the apply changed, as the
	// store held it; empty for a creation.
	over string
	at   time.Time
}

// includedIn reports whether the watch's version rv of the object holds the apply: it is the
// apply's answer or later. Resource versions compare as numbers
// (apimachinery's resourceversion): a version between the one the apply
// changed and its answer (another's write, such as the status the
// StatefulSet controller writes, landing while the apply was sent) is not
// the apply. Where they do not compare, any version but the one the apply
// changed counts as later.
func (a applied) includedIn(rv string) bool {
	if c, err := resourceversion.CompareResourceVersion(rv, a.summary.ResourceVersion); err == nil {
		return c >= 0
	}
	return rv != a.over
}

type appliedKey struct {
	kind Kind
	key  types.NamespacedName
}

// appliedMemory is how long RememberApplied remembers an apply the informer
// has not shown yet: far longer than a watch takes to deliver one.
const appliedMemory = time.Minute

// RememberApplied records the summary of an object the controller just
// created or changed, as the apiserver answered, completed with what the
// answer lacks: the digest of what it applied, and its apply's
// managed-fields entry (the time). over is the summary the store gave of
// the object before the apply (nil for a creation). Until the store's
// watch shows the object otherwise than over, Get returns the record: a
// reconcile that a watch event starts in between (a resync, the
// Memcached's own change) sees what the apply made, and does not send it
// again.
func (s *Store) RememberApplied(over, answer *Summary, digest Digest) {
	now := time.Now()
	sum := answer.DeepCopy()
	sum.Digest = &digest
	sum.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager:    FieldManager,
		Operation:  metav1.ManagedFieldsOperationApply,
		APIVersion: sum.APIVersion,
		Time:       &metav1.Time{Time: now},
	}}
	rec := applied{summary: sum, at: now}
	if over != nil {
		rec.over = over.ResourceVersion
	}
	key := appliedKey{sum.Kind(), types.NamespacedName{Namespace: sum.Namespace, Name: sum.Name}}
	s.appliedMu.Lock()
	defer s.appliedMu.Unlock()
	if prev, ok := s.applied[key]; ok && over != nil && prev.summary.ResourceVersion == over.ResourceVersion {
		// over is itself an apply the watch has not shown yet: the
		// version the watch still shows is the one before that.
		rec.over = prev.over
	}
	if cur, found, _ := lookup[*Summary](s.informers, key.kind, key.key); found && rec.includedIn(cur.ResourceVersion) {
		// The watch showed it already (the informer holds an object
		// before its handlers hear of it).
		return
	}
	for k, v := range s.applied {
		if now.Sub(v.at) > appliedMemory {
			delete(s.applied, k)
		}
	}
	s.applied[key] = rec
}

// seen forgets what RememberApplied recorded of an object once the store's
// watch shows the apply or a later version: from then on the
// watch alone tells what it is, and a later change or a deletion is not
// hidden by the record.
func (s *Store) seen(obj any) {
	sum, ok := obj.(*Summary)
	if !ok {
		return
	}
	key := appliedKey{sum.Kind(), types.NamespacedName{Namespace: sum.Namespace, Name: sum.Name}}
	s.appliedMu.Lock()
	defer s.appliedMu.Unlock()
	if rec, ok := s.applied[key]; ok && rec.includedIn(sum.ResourceVersion) {
		delete(s.applied, key)
	}
}

// unseen returns the summary RememberApplied recorded of the object of
// kind k with that key while the store's watch has not shown the apply
// (cur; nil when the watch has not shown the object at all).
func (s *Store) unseen(k Kind, key types.NamespacedName, cur *Summary) (*Summary, bool) {
	s.appliedMu.Lock()
	defer s.appliedMu.Unlock()
	rec, ok := s.applied[appliedKey{k, key}]
	switch {
	case !ok:
		return nil, false
	case time.Since(rec.at) > appliedMemory:
		delete(s.applied, appliedKey{k, key})
		return nil, false
	case cur == nil && rec.over != "", cur != nil && rec.includedIn(cur.ResourceVersion):
		return nil, false
	}
	return rec.summary, true
}
