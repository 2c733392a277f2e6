//go:build tools

// Package tools pins the kwok commands built by hack/build-cluster.sh.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/kwok/cmd/kwokctl"
)
