package owned

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

type created struct {
	summary *Summary
	at      time.Time
}

type createdKey struct {
	kind Kind
	key  types.NamespacedName
}

// createdMemory is how long RememberCreated remembers a creation the informer has
// not shown yet: far longer than a watch takes to deliver one.
const createdMemory = time.Minute

// RememberCreated records the summary of an object the controller just created,
// as the apiserver answered, completed with what the answer lacks: the
// digest of what it applied, and its apply's managed-fields entry (the
// time). Until the store's watch shows the object, Unseen returns it.
func (s *Store) RememberCreated(answer *Summary, applied Digest) {
	now := time.Now()
	sum := answer.DeepCopy()
	sum.Digest = &applied
	sum.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager:    FieldManager,
		Operation:  metav1.ManagedFieldsOperationApply,
		APIVersion: sum.APIVersion,
		Time:       &metav1.Time{Time: now},
	}}
	key := createdKey{sum.Kind(), types.NamespacedName{Namespace: sum.Namespace, Name: sum.Name}}
	s.createdMu.Lock()
	defer s.createdMu.Unlock()
	if _, found, _ := s.Get(key.kind, key.key); found {
		// The watch showed it already (the informer holds an object
		// before its handlers hear of it).
		return
	}
	for c, v := range s.created {
		if now.Sub(v.at) > createdMemory {
			delete(s.created, c)
		}
	}
	s.created[key] = created{summary: sum, at: now}
}

// seen forgets what RememberCreated recorded of an object once the store's watch
// shows it: from then on the watch alone tells whether it exists, and a
// deletion is not hidden by the record.
func (s *Store) seen(obj any) {
	sum, ok := obj.(*Summary)
	if !ok {
		return
	}
	s.createdMu.Lock()
	defer s.createdMu.Unlock()
	delete(s.created, createdKey{sum.Kind(), types.NamespacedName{Namespace: sum.Namespace, Name: sum.Name}})
}

// Unseen returns the summary RememberCreated recorded of the object of kind k with
// that key when the store's watch has not shown that object yet (seen
// forgets it once the watch does): the store's answer that it does not
// exist is then not to be trusted.
func (s *Store) Unseen(k Kind, key types.NamespacedName) (*Summary, bool) {
	s.createdMu.Lock()
	defer s.createdMu.Unlock()
	c, ok := s.created[createdKey{k, key}]
	if !ok {
		return nil, false
	}
	if time.Since(c.at) > createdMemory {
		delete(s.created, createdKey{k, key})
		return nil, false
	}
	return c.summary, true
}
