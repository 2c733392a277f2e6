// Package discovery serves a Memcached's membership the way AWS
// ElastiCache's auto discovery does, so that the memcached clients that
// implement it (in most languages) find every server of a Memcached from
// one address and follow it as it changes.
//
// A client asks a configuration endpoint `config get cluster` (or, of a
// server older than 1.4.14, `get AmazonElastiCache:cluster`) and gets a
// version, which increases on every change, and one host|ip|port per
// server:
//
//	CONFIG cluster 0 61
//	7
//	cache-0.cache.ns.svc|10.0.0.5|11211 cache-1.cache.ns.svc|10.0.0.6|11211
//
//	END
//
// As ElastiCache's endpoint is itself a node, the endpoint serves
// memcached's data commands too: a connection whose first command is not a
// discovery command is handed to the pod's memcached whole (Server).
package discovery

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Node is one memcached server of a cluster.
type Node struct {
	// Host is the server's stable DNS name; clients that key their hash
	// ring on it keep their keys' places when its address changes.
	Host string
	// IP is the server's address when last seen.
	IP string
	// Port is memcached's port.
	Port int32
}

// Cluster is what the endpoint answers: the membership's version and its
// servers, in slot order.
type Cluster struct {
	// Version increases on every change of Nodes.
	Version int64
	Nodes   []Node
}

// maxClusterBytes bounds what Parse reads: far more than the servers a
// Memcached may have (the CRD bounds its size) take.
const maxClusterBytes = 256 << 10

// Body is the cluster's answer as ElastiCache writes it: the version on
// its own line, then every node on one line, separated by spaces.
func (c Cluster) Body() []byte {
	var b bytes.Buffer
	b.WriteString(strconv.FormatInt(c.Version, 10))
	b.WriteByte('\n')
	for i, n := range c.Nodes {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s|%s|%d", n.Host, n.IP, n.Port)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// Parse reads a cluster from its Body, refusing what a client could not
// use: a version that is not a positive number, a node without a host
// name, an address or a port.
func Parse(body []byte) (Cluster, error) {
	if len(body) > maxClusterBytes {
		return Cluster{}, fmt.Errorf("%d bytes, more than %d", len(body), maxClusterBytes)
	}
	version, nodes, ok := strings.Cut(strings.TrimSuffix(string(body), "\n"), "\n")
	if !ok {
		return Cluster{}, errors.New("no line of nodes after the version")
	}
	var c Cluster
	var err error
	if c.Version, err = strconv.ParseInt(version, 10, 64); err != nil || c.Version < 1 {
		return Cluster{}, fmt.Errorf("version %q is not a positive number", version)
	}
	for entry := range strings.FieldsSeq(nodes) {
		parts := strings.Split(entry, "|")
		if len(parts) != 3 {
			return Cluster{}, fmt.Errorf("node %q is not host|ip|port", entry)
		}
		port, err := strconv.ParseInt(parts[2], 10, 32)
		switch {
		case parts[0] == "":
			return Cluster{}, fmt.Errorf("node %q has no host name", entry)
		case net.ParseIP(parts[1]) == nil:
			return Cluster{}, fmt.Errorf("node %q has no IP address", entry)
		case err != nil || port < 1 || port > 65535:
			return Cluster{}, fmt.Errorf("node %q has no port", entry)
		}
		c.Nodes = append(c.Nodes, Node{Host: parts[0], IP: parts[1], Port: int32(port)})
	}
	return c, nil
}
