//go:build tools

// Package tools pins the node programs built by hack/build-cluster.sh.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
