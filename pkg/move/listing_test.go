//go:build integration

package move_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/example/memcached-operator/pkg/move"
)

// A key the first listing cannot show (here written on the leaving slot
// after it, as a client's get can move one into a queue the crawler has
// walked already) is copied all the same: Copy lists the server twice,
// the second time after the first listing's keys are copied.
func TestAKeyTheFirstListingMissedIsCopied(t *testing.T) {
	ctx := context.Background()
	c := start(t, "127.0.0.86", 4)
	before := c.ring(t, c.names)
	for i := range 2000 {
		c.set(t, before, fmt.Sprintf("key-%d", i), fmt.Sprintf("v-%d", i), 0, 0)
	}
	leaving := c.names[3]
	after := c.ring(t, c.names[:3])
	// Written when the mover dials the leaving slot again once it has
	// dialed another (copied to it): at the second listing.
	const late = "written-after-the-first-listing"
	var copying, written bool
	dial := func(ctx context.Context, server string) (net.Conn, error) {
		switch {
		case server != leaving:
			copying = true
		case copying && !written:
			if err := c.clients[leaving].Set(&memcache.Item{Key: late, Value: []byte("late")}); err != nil {
				t.Error(err)
			}
			written = true
		}
		return plain(ctx, server)
	}
	if _, err := (&move.Mover{Dial: dial}).Copy(ctx, leaving, after); err != nil {
		t.Fatal(err)
	}
	if !written {
		t.Fatal("the leaving slot was not listed again after the first listing's keys were copied")
	}
	if got := c.at(t, after.Server(late), late); got != "late" {
		t.Errorf("a key written after the first listing reads %q on its new owner, want it copied", got)
	}
}
