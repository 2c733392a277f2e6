package move

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/example/memcached-operator/pkg/discovery"
)

// sealed tells whether the pod's seal vouches for plan (always, without
// a SealFile).
func (f *Follower) sealed(plan []byte) bool {
	if f.SealFile == "" {
		return true
	}
	seal, err := discovery.ReadSeal(f.SealFile)
	return err == nil && seal.VouchesPlan(plan)
}

// tellOnce logs why a plan is not followed, once until the reason changes.
func (f *Follower) tellOnce(level slog.Level, msg string, args ...any) {
	key := fmt.Sprint(append([]any{msg}, args...)...)
	if f.done[0][key] {
		return
	}
	f.Log.Log(context.Background(), level, msg, args...)
	f.done[0] = map[string]bool{key: true}
}
