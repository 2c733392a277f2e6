package main

import (
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/bradfitz/gomemcache/memcache"

	ketama "github.com/example/memcached-operator/pkg/ring"
)

// ring is a consistent-hash server selector for gomemcache: libmemcached's
// weighted ketama (pkg/ring), the ring the operator moves keys for
// (spec.keyMoves, docs/scaling.md) and pylibmc and php-memcached use. When
// a server is added to n, the keys it wins (about 1/(n+1) of them) move to
// it and no other key moves; when one is removed, only its keys move.
// gomemcache's own ServerList picks by CRC32 modulo, which moves most keys
// on any change.
//
// A server is hashed by its name, dialled at its address: a client of a
// Memcached's discovery endpoint names each server by its slot's stable
// host name, so that a pod replaced in its slot (a new address) takes the
// keys its slot had, and no other key moves.
type ring struct {
	mu      sync.RWMutex
	members []member // sorted by name
	addrs   []net.Addr
	hash    *ketama.Ring
	index   map[string]int // of members, by name
}

// member is a server of a ring: the name its keys are hashed with, and
// the address (host:port) it is dialled at.
type member struct{ name, addr string }

var _ memcache.ServerSelector = (*ring)(nil)

// newRing is a ring of servers, host:port each, named by their addresses.
func newRing(servers ...string) (*ring, error) {
	r := &ring{}
	return r, r.set(servers)
}

// set replaces the servers with servers named by their addresses.
func (r *ring) set(servers []string) error {
	members := make([]member, len(servers))
	for i, s := range servers {
		members[i] = member{name: s, addr: s}
	}
	return r.setMembers(members)
}

// setMembers replaces the servers; it does nothing when they are the same.
func (r *ring) setMembers(members []member) error {
	members = slices.SortedFunc(slices.Values(members), func(a, b member) int { return strings.Compare(a.name, b.name) })
	addrs := make([]net.Addr, len(members))
	for i, m := range members {
		a, err := net.ResolveTCPAddr("tcp", m.addr)
		if err != nil {
			return err
		}
		addrs[i] = a
	}
	names := make([]string, len(members))
	index := make(map[string]int, len(members))
	for i, m := range members {
		names[i], index[m.name] = m.name, i
	}
	var hash *ketama.Ring
	if len(members) > 0 {
		var err error
		if hash, err = ketama.New(ketama.Libmemcached, names); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Equal(r.members, members) {
		return nil
	}
	r.members, r.addrs, r.hash, r.index = members, addrs, hash, index
	return nil
}

// list is the servers' addresses now, sorted.
func (r *ring) list() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, len(r.members))
	for i, m := range r.members {
		out[i] = m.addr
	}
	slices.Sort(out)
	return out
}

// byName is the servers' addresses by their names.
func (r *ring) byName() map[string]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]string, len(r.members))
	for _, m := range r.members {
		out[m.name] = m.addr
	}
	return out
}

// PickServer is the server of key on the ring.
func (r *ring) PickServer(key string) (net.Addr, error) {
	_, a, err := r.pick(key)
	return a, err
}

// pick is the name and the address of key's server.
func (r *ring) pick(key string) (string, net.Addr, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.members) == 0 {
		return "", nil, memcache.ErrNoServers
	}
	i := r.index[r.hash.Server(key)]
	return r.members[i].name, r.addrs[i], nil
}

// names are the names of the servers of keys keyOf(0..n-1).
func (r *ring) names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i], _, _ = r.pick(keyOf(i))
	}
	return out
}

// Each calls f with each server.
func (r *ring) Each(f func(net.Addr) error) error {
	r.mu.RLock()
	addrs := slices.Clone(r.addrs)
	r.mu.RUnlock()
	for _, a := range addrs {
		if err := f(a); err != nil {
			return err
		}
	}
	return nil
}
