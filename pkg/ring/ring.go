// Package ring is the consistent hash a client of a Memcached's discovery
// endpoint puts keys on the slots with: libketama's continuum with equal
// weights ("ketama weighted"), as libmemcached computes it (and with it
// pylibmc, php-memcached and every client built on libmemcached) and as the
// Node client memcached 2.x does (its hashring package, compatibility
// "ketama"; memcached-elasticache is built on it).
//
// Each server, named host:port as the endpoint lists it, has 40 MD5
// digests on the continuum, of "host-i" when the port is memcached's
// default (11211) and "host:port-i" otherwise, i from 0; each digest gives
// four points, its bytes read four at a time, little end first. A key's
// point is the first four bytes of its MD5 digest, read the same way; its
// server is the one of the first point at or after it, the first point of
// all past the last.
//
// The two families differ in one thing: how many digests a server has.
// Both compute it from the server's share of the weight, in floating
// point, and round down, and each gets 39 rather than 40 at some sizes:
// libmemcached (in float) at 25, 47, 50, 55, 61… servers, Node (in double)
// at 7, 14, 28, 49, 56…; there about 3% of the keys land elsewhere than
// the other family's ring says, and a slot added or removed moves some
// keys between the slots that stay. The Hash says which the clients use.
package ring

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
)

// Hash names a client family's ketama.
type Hash string

const (
	// Libmemcached is libmemcached's ketama with weights
	// (MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED: pylibmc's "ketama_weighted",
	// php-memcached's OPT_LIBKETAMA_COMPATIBLE).
	Libmemcached Hash = "libmemcached"
	// Node is the Node client memcached 2.x's (the hashring package with
	// compatibility "ketama", memcached's default).
	Node Hash = "node"
)

// defaultPort is memcached's: a server on it is hashed by its host alone.
const defaultPort = 11211

// digestsPerServer is libketama's: 160 points, four to a digest.
const digestsPerServer = 40

// Ring places keys on servers. It is not changed once made.
type Ring struct {
	servers []string
	points  []point
}

// point is a place on the continuum and the server (an index of
// Ring.servers) it belongs to.
type point struct {
	value  uint32
	server int
}

// New is the ring of servers, each host:port, as clients of hash build it
// from the same list. The list's order matters only where two points fall
// on one value, as it does for the clients.
func New(hash Hash, servers []string) (*Ring, error) {
	digests, err := digestsOf(hash, len(servers))
	if err != nil {
		return nil, err
	}
	r := &Ring{servers: slices.Clone(servers), points: make([]point, 0, len(servers)*digests*4)}
	for s, server := range servers {
		host, portText, err := net.SplitHostPort(server)
		if err != nil {
			return nil, fmt.Errorf("server %q: %w", server, err)
		}
		port, err := strconv.Atoi(portText)
		if err != nil {
			return nil, fmt.Errorf("server %q: port: %w", server, err)
		}
		name := server
		if port == defaultPort {
			name = host
		}
		for i := range digests {
			d := md5.Sum([]byte(name + "-" + strconv.Itoa(i)))
			for j := range 4 {
				r.points = append(r.points, point{value: binary.LittleEndian.Uint32(d[j*4:]), server: s})
			}
		}
	}
	// Stable, as Node's sort is: equal points keep the servers' order.
	slices.SortStableFunc(r.points, func(a, b point) int {
		switch {
		case a.value < b.value:
			return -1
		case a.value > b.value:
			return 1
		}
		return 0
	})
	return r, nil
}

// digestsOf is how many digests a server of n, all of equal weight, has
// in hash's ring: its share of the weight times 40 times n, rounded down,
// computed in the types and order the client computes it.
func digestsOf(hash Hash, n int) (int, error) {
	switch hash {
	case Libmemcached:
		// floor((float)(pct * 160 / 4 * (float)live + 0.0000000001)) * 4 points,
		// pct a float: float arithmetic, the sum in double, back to float.
		pct := float32(1) / float32(n)
		x := pct * 160 / 4 * float32(n)
		return int(math.Floor(float64(float32(float64(x) + 0.0000000001)))), nil
	case Node:
		// Math.floor(percentage * vnodes * servers.length), in double.
		pct := 1 / float64(n)
		return int(math.Floor(pct * digestsPerServer * float64(n))), nil
	}
	return 0, fmt.Errorf("unknown hash %q: want %q or %q", hash, Libmemcached, Node)
}

// Servers is the ring's servers, in the order it was made with.
func (r *Ring) Servers() []string { return slices.Clone(r.servers) }

// Server is key's server; "" when the ring has none.
func (r *Ring) Server(key string) string {
	if len(r.points) == 0 {
		return ""
	}
	d := md5.Sum([]byte(key))
	v := binary.LittleEndian.Uint32(d[:4])
	i, _ := slices.BinarySearchFunc(r.points, v, func(p point, v uint32) int {
		switch {
		case p.value < v:
			return -1
		case p.value > v:
			return 1
		}
		return 0
	})
	if i == len(r.points) {
		i = 0
	}
	return r.servers[r.points[i].server]
}
