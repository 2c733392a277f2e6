package move

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"
)

// A pod's preStop hooks: the memcached container's and the discovery
// container's. The kubelet runs both when the pod is deleted, and one
// alone when it restarts that container in its pod (a new image set in
// place, a failed liveness probe): a hand-off is for the first only. Each
// hook writes its own file in the directory the containers share; the
// hand-off starts once both are there. A hook that does not find the
// other's within hooksMeet takes its file back and returns: its container
// alone restarts, and the cache stays.

// The hooks, by their containers.
const (
	MemcachedHook = "memcached"
	DiscoveryHook = "discovery"
)

// HandedOffFile is written in the hooks' directory once the keys are
// handed off.
const HandedOffFile = "handed-off"

// hooksMeet bounds how long a hook waits for the other: the kubelet starts
// both at once.
const hooksMeet = 3 * time.Second

// leavingFile is the file hook writes in dir.
func leavingFile(dir, hook string) string { return filepath.Join(dir, "leaving-"+hook) }

// leaving tells whether both hooks asked for a hand-off in dir.
func leaving(dir string) bool {
	return exists(leavingFile(dir, MemcachedHook)) && exists(leavingFile(dir, DiscoveryHook))
}

func exists(file string) bool {
	_, err := os.Stat(file)
	return err == nil
}

// AwaitHandOff is the preStop hook of the container hook: it asks for a
// hand-off in dir and, when the other hook asks too, waits until the keys
// are handed off. It returns no sooner than least.
func AwaitHandOff(ctx context.Context, dir, hook string, least time.Duration) error {
	start := time.Now()
	mine, other := leavingFile(dir, hook), leavingFile(dir, MemcachedHook)
	if hook == MemcachedHook {
		other = leavingFile(dir, DiscoveryHook)
	}
	f, err := os.OpenFile(mine, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	f.Close()
	for !exists(other) {
		if time.Since(start) >= hooksMeet {
			// This container alone restarts.
			if err := os.Remove(mine); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			return sleep(ctx, time.Until(start.Add(least)))
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	for !exists(filepath.Join(dir, HandedOffFile)) || time.Since(start) < least {
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
