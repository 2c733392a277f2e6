package memcached

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// unchanged remembers, per object, the last comparison that found nothing
// to apply: the object's resourceVersion and a hash of what the operator
// wanted then. The same object at the same resourceVersion, compared with
// the same intent, gives the same answer, so a resync of a converged
// Memcached skips the comparison (structured-merge-diff's typed conversion
// of the whole object, most of a reconcile's CPU). The zero value is ready.
type unchanged struct {
	mu      sync.Mutex
	entries map[unchangedKey]unchangedEntry
}

type unchangedKey struct {
	kind string
	key  types.NamespacedName
}

type unchangedEntry struct {
	uid             types.UID
	resourceVersion string
	want            uint64
}

var wantSeed = maphash.MakeSeed()

// matches reports whether owned, what the operator owns of obj, holds
// exactly want, what it would apply: then applying changes nothing. A match
// is remembered for obj's resourceVersion and want, and owned is not called
// again while both stay the same.
func (u *unchanged) matches(kind string, obj client.Object, want any, owned func() (any, error)) (bool, error) {
	raw, err := json.Marshal(want)
	if err != nil {
		return false, fmt.Errorf("encoding apply configuration: %w", err)
	}
	h := maphash.Bytes(wantSeed, raw)
	key, uid, rv := client.ObjectKeyFromObject(obj), obj.GetUID(), obj.GetResourceVersion()
	if u.known(kind, key, uid, rv, h) {
		return true, nil
	}
	have, err := owned()
	if err != nil {
		return false, fmt.Errorf("extracting the operator's fields of %s %s: %w", kind, key.Name, err)
	}
	same, err := jsonEqual(have, json.RawMessage(raw))
	if same {
		u.remember(kind, key, uid, rv, h)
	}
	return same, err
}

// known tells whether the object was found unchanged at this
// resourceVersion with this intent before.
func (u *unchanged) known(kind string, key types.NamespacedName, uid types.UID, resourceVersion string, want uint64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	e, ok := u.entries[unchangedKey{kind, key}]
	return ok && e.uid == uid && e.resourceVersion == resourceVersion && e.want == want
}

// remember records that the object needs nothing at this resourceVersion.
func (u *unchanged) remember(kind string, key types.NamespacedName, uid types.UID, resourceVersion string, want uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.entries == nil {
		u.entries = map[unchangedKey]unchangedEntry{}
	}
	u.entries[unchangedKey{kind, key}] = unchangedEntry{uid, resourceVersion, want}
}

// forget drops what is remembered about a Memcached and its objects, once it is gone.
func (u *unchanged) forget(key types.NamespacedName) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, kind := range []string{deployments.name, services.name, podDisruptionBudgets.name, kindMemcachedStatus} {
		delete(u.entries, unchangedKey{kind, key})
	}
}
