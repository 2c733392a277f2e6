//go:build integration

package move_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/example/memcached-operator/pkg/move"
)

// onSecondDial dials as plain does, and calls do once, before the second
// connection to server: the first is the listing's, the second the one its
// keys are then read or deleted on. The copy's lanes dial at once: the
// others wait for do.
func onSecondDial(server string, do func()) func(context.Context, string) (net.Conn, error) {
	var mu sync.Mutex
	dials := 0
	return func(ctx context.Context, s string) (net.Conn, error) {
		if s == server {
			mu.Lock()
			if dials++; dials == 2 {
				do()
			}
			mu.Unlock()
		}
		return plain(ctx, s)
	}
}

// A key deleted from the leaving slot between its listing and its read is
// counted gone and not copied; an empty value is copied as one.
func TestAKeyGoneSinceItsListingIsCountedGone(t *testing.T) {
	c := start(t, "127.0.0.91", 2)
	leaving := c.names[1]
	after := c.ring(t, c.names[:1])
	for i := range 100 {
		c.set(t, c.ring(t, c.names[1:]), fmt.Sprintf("key-%d", i), "v", 0, 0)
	}
	c.set(t, c.ring(t, c.names[1:]), "empty", "", 0, 0)
	dial := onSecondDial(leaving, func() {
		if err := c.clients[leaving].Delete("key-7"); err != nil {
			t.Error(err)
		}
	})
	res, err := (&move.Mover{Dial: dial}).Copy(context.Background(), leaving, after)
	if err != nil {
		t.Fatal(err)
	}
	if res.Listed != 101 || res.Gone != 1 || res.Copied != 100 {
		t.Errorf("listed %d, gone %d, copied %d; want 101 listed, the deleted key gone and the other 100 copied", res.Listed, res.Gone, res.Copied)
	}
	if _, err := c.clients[c.names[0]].Get("key-7"); err != memcache.ErrCacheMiss {
		t.Errorf("the deleted key on its new owner: %v, want a miss", err)
	}
	if it, err := c.clients[c.names[0]].Get("empty"); err != nil || len(it.Value) != 0 {
		t.Errorf("the empty value on its new owner: %v", err)
	}
}

// A key copied and then written on its old owner between the settle's
// listing and its delete (a client still on the old membership) leaves no
// value anywhere: neither the newer one on the slot it left, which a later
// membership could bring back, nor the older copy on its new owner.
func TestAKeyWrittenDuringTheSettleLeavesNoValue(t *testing.T) {
	ctx := context.Background()
	c := start(t, "127.0.0.91", 2)
	leaving, owner := c.names[1], c.names[0]
	after := c.ring(t, c.names[:1])
	for i := range 100 {
		c.set(t, c.ring(t, c.names[1:]), fmt.Sprintf("key-%d", i), "v1", 0, 0)
	}
	mover := &move.Mover{Dial: plain}
	copied, err := mover.Copy(ctx, leaving, after)
	if err != nil || copied.Copied != 100 {
		t.Fatalf("copy: %+v %v", copied, err)
	}
	mover.Dial = onSecondDial(leaving, func() {
		if err := c.clients[leaving].Set(&memcache.Item{Key: "key-7", Value: []byte("v2")}); err != nil {
			t.Error(err)
		}
	})
	res, err := mover.Settle(ctx, leaving, after, copied.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	if want := (move.SettleResult{Removed: 99, Invalidated: 1}); res != want {
		t.Errorf("settled %+v, want %+v", res, want)
	}
	for _, s := range []string{leaving, owner} {
		if got := c.at(t, s, "key-7"); got != "" {
			t.Errorf("%s holds %q of the key written during the settle, want none", s, got)
		}
	}
}
