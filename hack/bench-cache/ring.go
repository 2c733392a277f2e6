package main

import (
	"net"
	"slices"
	"sync"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/serialx/hashring"
)

// ring is a consistent-hash server selector for gomemcache (ketama-style,
// 40 points per server hashed with MD5, as serialx/hashring places them):
// when a server is added to n, about 1/(n+1) of the keys move to it and
// the rest stay where they were, unlike gomemcache's own ServerList, whose
// CRC32 modulo moves most keys on any change.
type ring struct {
	mu      sync.RWMutex
	servers []string
	addrs   map[string]net.Addr
	hash    *hashring.HashRing
}

var _ memcache.ServerSelector = (*ring)(nil)

// newRing is a ring of servers, host:port each.
func newRing(servers ...string) (*ring, error) {
	r := &ring{}
	return r, r.set(servers)
}

// set replaces the servers; it does nothing when they are the same.
func (r *ring) set(servers []string) error {
	servers = slices.Sorted(slices.Values(servers))
	addrs := make(map[string]net.Addr, len(servers))
	for _, s := range servers {
		a, err := net.ResolveTCPAddr("tcp", s)
		if err != nil {
			return err
		}
		addrs[s] = a
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Equal(r.servers, servers) {
		return nil
	}
	r.servers, r.addrs, r.hash = servers, addrs, hashring.New(servers)
	return nil
}

// list is the servers now, sorted.
func (r *ring) list() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.servers)
}

// PickServer is the server of key.
func (r *ring) PickServer(key string) (net.Addr, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.servers) == 0 {
		return nil, memcache.ErrNoServers
	}
	s, ok := r.hash.GetNode(key)
	if !ok {
		return nil, memcache.ErrNoServers
	}
	return r.addrs[s], nil
}

// Each calls f with each server.
func (r *ring) Each(f func(net.Addr) error) error {
	r.mu.RLock()
	addrs := make([]net.Addr, 0, len(r.servers))
	for _, s := range r.servers {
		addrs = append(addrs, r.addrs[s])
	}
	r.mu.RUnlock()
	for _, a := range addrs {
		if err := f(a); err != nil {
			return err
		}
	}
	return nil
}
