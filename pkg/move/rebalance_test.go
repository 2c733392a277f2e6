//go:build integration

package move_test

import (
	"bufio"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/internal/testsupport/memcachedproc"
	"github.com/example/memcached-operator/pkg/memcachedconn"
	"github.com/example/memcached-operator/pkg/move"
)

// TestAKeyMemcachedMovedIsNotTakenForAWrite: memcached's slab rebalancer
// moves the items of a page it gives to another slab class into free
// chunks of their own class, and gives each a new CAS. A key it moved
// after its copy is as copied still: the settle removes it from its old
// server and keeps its copy, where a CAS alone would have read a client's
// write and deleted both (a hand-off under memory pressure lost half its
// slot's keys so). A key a client rewrote is still invalidated.
func TestAKeyMemcachedMovedIsNotTakenForAWrite(t *testing.T) {
	old, owner, res, command := copiedWithFillers(t)
	if reply := command("set key-0 0 0 5\r\nnewer\r\n"); reply != "STORED" {
		t.Fatalf("rewriting key-0: %q", reply)
	}
	rescued := rebalance(t, old)
	settled, err := (&move.Mover{Dial: plain}).Settle(context.Background(), old, (&cluster{}).ring(t, []string{owner}), res.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("memcached moved %d items; settled %+v", rescued, settled)
	if settled.Invalidated != 1 || settled.Removed != fillersN-1 {
		t.Fatalf("settled %+v: want %d removed and key-0 invalidated", settled, fillersN-1)
	}
	expectCopiesBut(t, owner, fillersN, 1024, "key-0")
}

// TestAKeyMemcachedMovesDuringTheSettleIsNotTakenForAWrite: memcached
// moves items between the settle's listing and its deletes (as it does
// while the settle frees its pages): each is deleted at its new CAS, its
// copy kept.
func TestAKeyMemcachedMovesDuringTheSettleIsNotTakenForAWrite(t *testing.T) {
	old, owner, res, _ := copiedWithFillers(t)
	var rescued int
	mover := &move.Mover{Dial: onSecondDial(old, func() { rescued = rebalance(t, old) })}
	settled, err := mover.Settle(context.Background(), old, (&cluster{}).ring(t, []string{owner}), res.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("memcached moved %d items; settled %+v", rescued, settled)
	if settled.Invalidated != 0 || settled.Removed != fillersN {
		t.Fatalf("settled %+v: want all %d removed", settled, fillersN)
	}
	expectCopiesBut(t, owner, fillersN, 1024, "")
}

// fillersN is how many keys copiedWithFillers stores, and as many fillers.
const fillersN = 3000

// copiedWithFillers stores keys and fillers side by side in the same pages
// of a memcached, copies them all to another, and deletes the fillers: they
// leave free chunks memcached's rebalancer moves the keys into. It returns
// both memcacheds, the copy, and a command on the first.
func copiedWithFillers(t *testing.T) (old, owner string, res move.CopyResult, command func(string) string) {
	t.Helper()
	old = memcachedproc.StartOn(t, "127.0.0.105").Addr
	owner = memcachedproc.StartOn(t, "127.0.0.105").Addr
	conn, err := plain(context.Background(), old)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	command = func(req string) string {
		t.Helper()
		reply, err := memcachedconn.Command(conn, req)
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}
	value := strings.Repeat("v", 1024)
	for i := range fillersN {
		for _, k := range []string{fmt.Sprintf("key-%d", i), fmt.Sprintf("filler-%d", i)} {
			if reply := command(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(value), value)); reply != "STORED" {
				t.Fatalf("set %s: %q", k, reply)
			}
		}
	}
	res, err = (&move.Mover{Dial: plain}).Copy(context.Background(), old, (&cluster{}).ring(t, []string{owner}))
	if err != nil || res.Copied != 2*fillersN {
		t.Fatalf("copied %+v: %v", res, err)
	}
	for i := range fillersN {
		command(fmt.Sprintf("delete filler-%d\r\n", i))
		delete(res.Ledger, fmt.Sprintf("filler-%d", i))
	}
	return old, owner, res, command
}

// expectCopiesBut checks that owner holds key-0 … key-<n-1> with values of
// size bytes, but gone, which it must not hold.
func expectCopiesBut(t *testing.T, owner string, n, size int, gone string) {
	t.Helper()
	oc, err := plain(context.Background(), owner)
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	for i := range n {
		k := fmt.Sprintf("key-%d", i)
		reply, err := memcachedconn.Command(oc, "mg "+k+" s\r\n")
		want := fmt.Sprintf("HD s%d", size)
		if k == gone {
			want = "EN"
		}
		if err != nil || reply != want {
			t.Fatalf("%s on its new owner: %q %v, want %q", k, reply, err, want)
		}
	}
}

// rebalance has the memcached at addr give the pages of the keys' slab
// class away until its rebalancer moved some of their items, and returns
// how many it moved.
func rebalance(t *testing.T, addr string) int {
	t.Helper()
	stats := func(what string) string {
		conn, err := plain(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write([]byte(what + "\r\n")); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		r := bufio.NewReader(conn)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if line == "END\r\n" {
				return out.String()
			}
			out.WriteString(line)
		}
	}
	rescues := func() int {
		m := regexp.MustCompile(`(?m)^STAT slab_reassign_rescues (\d+)\r?$`).FindStringSubmatch(stats("stats"))
		if m == nil {
			t.Fatal("no slab_reassign_rescues")
		}
		v, _ := strconv.Atoi(m[1])
		return v
	}
	// The keys' class: the one that holds the most.
	class, most := "", 0
	for _, m := range regexp.MustCompile(`(?m)^STAT (\d+):used_chunks (\d+)\r?$`).FindAllStringSubmatch(stats("stats slabs"), -1) {
		if used, _ := strconv.Atoi(m[2]); used > most {
			class, most = m[1], used
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for rescues() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("memcached moved no item")
		}
		conn, err := plain(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
		reply, err := memcachedconn.Command(conn, "slabs reassign "+class+" 0\r\n")
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("slabs reassign %s 0: %s", class, reply)
		time.Sleep(100 * time.Millisecond)
	}
	return rescues()
}
