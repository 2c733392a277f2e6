//go:build tools

// Package tools pins kube-router, the real node's NetworkPolicy
// enforcement, built by hack/build-cluster.sh.
package tools

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
