package main

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
)

const (
	// heldCount keys outside the load's are written once and read back
	// every heldEvery.
	heldCount = 1000
	heldEvery = 2 * time.Second
)

// heldKeys are keys the load never touches, written once when the
// Memcached serves and read back every heldEvery through the load's
// client. Read that often, they stay in the active part of memcached's
// LRU whatever the load evicts, so that one that stops reading back was
// lost by a change of size, not pushed out by the load: the Memcached
// sized right from the start, which never changes size, is the check of
// that. present is how many read back at the last reading, -1 when it
// failed.
type heldKeys struct {
	c       *memcache.Client
	present atomic.Int64
}

func heldKey(i int) string   { return fmt.Sprintf("held-%05d", i) }
func heldValue(i int) []byte { return fmt.Appendf(nil, "held value %05d", i) }

// write stores every held key, each tried again until ctx ends.
func (h *heldKeys) write(ctx context.Context) error {
	for i := range heldCount {
		for {
			err := h.c.Set(&memcache.Item{Key: heldKey(i), Value: heldValue(i)})
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("writing the held keys: %w", err)
			}
			sleep(ctx, 100*time.Millisecond)
		}
	}
	h.present.Store(heldCount)
	return nil
}

// run reads every held key back every heldEvery until ctx ends.
func (h *heldKeys) run(ctx context.Context) {
	keys := make([]string, heldCount)
	for i := range keys {
		keys[i] = heldKey(i)
	}
	every(ctx, heldEvery, func() {
		got, err := h.c.GetMulti(keys)
		if err != nil {
			// A server not reached says nothing of the keys it holds.
			h.present.Store(-1)
			return
		}
		n := 0
		for i, k := range keys {
			if it, ok := got[k]; ok && bytes.Equal(it.Value, heldValue(i)) {
				n++
			}
		}
		h.present.Store(int64(n))
	})
}
