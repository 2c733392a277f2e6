//go:build tools

// Package tools pins CoreDNS, built by hack/build-cluster.sh.
package tools

import _ "github.com/coredns/coredns"
