package memcached

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestUnchangedRemembersOnlyTheSameObjectAndIntent(t *testing.T) {
	var u unchanged
	key := types.NamespacedName{Namespace: "ns", Name: "cache"}
	if u.known("Deployment", key, "uid-1", "10", 7) {
		t.Fatal("nothing remembered yet")
	}
	u.remember("Deployment", key, "uid-1", "10", 7)
	tests := []struct {
		name string
		kind string
		uid  types.UID
		rv   string
		want uint64
		hit  bool
	}{
		{"same object, version and intent", "Deployment", "uid-1", "10", 7, true},
		{"object changed since", "Deployment", "uid-1", "11", 7, false},
		{"intent changed since", "Deployment", "uid-1", "10", 8, false},
		{"recreated under the same name", "Deployment", "uid-2", "10", 7, false},
		{"another kind", "Service", "uid-1", "10", 7, false},
	}
	for _, tt := range tests {
		if got := u.known(tt.kind, key, tt.uid, tt.rv, tt.want); got != tt.hit {
			t.Errorf("%s: known = %v, want %v", tt.name, got, tt.hit)
		}
	}
	u.forget(key)
	if u.known("Deployment", key, "uid-1", "10", 7) {
		t.Error("forgotten with its Memcached")
	}
}
