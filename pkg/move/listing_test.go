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
	held := 0
	for i := range 2000 {
		if before.Server(fmt.Sprintf("key-%d", i)) == leaving {
			held++
		}
	}
	res, err := (&move.Mover{Dial: dial}).Copy(ctx, leaving, after)
	if err != nil {
		t.Fatal(err)
	}
	if res.Listed != held || res.Leaving != held+1 || res.Copied != held+1 {
		t.Errorf("listed %d, leaving %d, copied %d; want the %d keys of the first listing listed, and one more leaving and copied", res.Listed, res.Leaving, res.Copied, held)
	}
	if !written {
		t.Fatal("the leaving slot was not listed again after the first listing's keys were copied")
	}
	if got := c.at(t, after.Server(late), late); got != "late" {
		t.Errorf("a key written after the first listing reads %q on its new owner, want it copied", got)
	}
}
