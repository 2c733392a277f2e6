//go:build integration

package move_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/example/memcached-operator/pkg/memcachedconn"
	"github.com/example/memcached-operator/pkg/move"
)

// Keys up to memcached's longest (250 bytes) move, and a key with a space
// up to the longest memcached takes in base64 (186 bytes: 187 encoded in 252 is
// refused). A longer key with a space, which only the binary protocol
// stores, cannot be named on any command line: it is left where it is,
// and the other keys move all the same.
func TestTheLongestKeysMove(t *testing.T) {
	ctx := context.Background()
	c := start(t, "127.0.0.91", 2)
	leaving := c.names[1]
	after := c.ring(t, c.names[:1])
	long := strings.Repeat("k", 250)
	if err := c.clients[leaving].Set(&memcache.Item{Key: long, Value: []byte("long")}); err != nil {
		t.Fatal(err)
	}
	spaced, tooLong := "a b"+strings.Repeat("k", 183), "a b"+strings.Repeat("k", 184)
	conn, err := plain(ctx, leaving)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if reply, err := memcachedconn.Command(conn, "ms "+base64.StdEncoding.EncodeToString([]byte(spaced))+" 6 b T0\r\nspaced\r\n"); err != nil || reply != "HD" {
		t.Fatalf("storing a key of %d bytes: %q, %v", len(spaced), reply, err)
	}
	setBinary(t, leaving, tooLong, "binary")
	res, err := (&move.Mover{Dial: plain}).Copy(ctx, leaving, after)
	if err != nil {
		t.Fatal(err)
	}
	if res.Listed != 3 || res.Copied != 2 {
		t.Errorf("%+v, want 3 keys listed and 2 copied", res)
	}
	if got := c.at(t, c.names[0], long); got != "long" {
		t.Errorf("the key of 250 bytes on its new owner: %q", got)
	}
	to, err := plain(ctx, c.names[0])
	if err != nil {
		t.Fatal(err)
	}
	defer to.Close()
	if reply, err := memcachedconn.Command(to, "mg "+base64.StdEncoding.EncodeToString([]byte(spaced))+" b s\r\n"); err != nil || reply != "HD s6" {
		t.Errorf("the key of 186 bytes with a space on its new owner: %q, %v", reply, err)
	}
}

// setBinary stores key on server through memcached's binary protocol,
// which takes keys no command line can name.
func setBinary(t *testing.T, server, key, value string) {
	t.Helper()
	conn, err := net.Dial("tcp", server)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := []byte{0x80, 0x01} // a request: set
	req = binary.BigEndian.AppendUint16(req, uint16(len(key)))
	req = append(req, 8, 0, 0, 0) // extras (flags, expiry), raw data, vbucket
	req = binary.BigEndian.AppendUint32(req, uint32(8+len(key)+len(value)))
	req = append(req, make([]byte, 4+8+8)...) // opaque, CAS, then the extras: flags 0, no expiry
	req = append(append(req, key...), value...)
	if _, err := conn.Write(req); err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 24)
	if _, err := io.ReadFull(conn, head); err != nil {
		t.Fatal(err)
	}
	if status := binary.BigEndian.Uint16(head[6:8]); head[0] != 0x81 || status != 0 {
		t.Fatalf("a binary set of a key of %d bytes: magic %#x, status %d", len(key), head[0], status)
	}
}
