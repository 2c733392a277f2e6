//go:build integration

package move_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

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
	// dialed another (copied to it): after the first listing.
	const late = "written-after-the-first-listing"
	var mu sync.Mutex
	var copying, written bool
	dial := func(ctx context.Context, server string) (net.Conn, error) {
		mu.Lock()
		defer mu.Unlock()
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

// A listing does not wait without end for memcached's LRU crawler while
// another's request holds it (here a metadump nobody reads: memcached
// 1.6.18 then answers a second metadump nothing at all, not BUSY): past
// ListIdle the copy fails, saying why, so that a leaving pod ends its
// hand-off rather than hold its node's drain until its grace period ends.
func TestAListingGivesUpOnACrawlerAnotherHolds(t *testing.T) {
	c := start(t, "127.0.0.106", 2)
	held, other := c.names[0], c.names[1]
	for i := range 100000 {
		if err := c.clients[held].Set(&memcache.Item{Key: fmt.Sprintf("key-%d", i), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	// A metadump of 100,000 keys (about 10 MB) fills the sockets'
	// buffers: unread, it holds the crawler.
	stuck, err := net.Dial("tcp", held)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	if err := stuck.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	if _, err := stuck.Write([]byte("lru_crawler metadump hash\r\n")); err != nil {
		t.Fatal(err)
	}
	// Its first line read: the crawler walks for it, and nobody reads on.
	if _, err := bufio.NewReaderSize(stuck, 16).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = (&move.Mover{Dial: plain, ListIdle: 2 * time.Second}).Copy(ctx, held, c.ring(t, []string{other}))
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("copy: %v; want the listing's read to fail past ListIdle, well before the test's own deadline", err)
	}
	if !strings.Contains(err.Error(), "listing the keys of "+held) {
		t.Errorf("copy: %v; want it to say it was listing %s", err, held)
	}
}
