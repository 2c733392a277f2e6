//go:build tools

// Package tools pins the commands that hack/build-cluster.sh builds for
// KUBE_VERSION: the control plane, and the real node's kubelet and kube-proxy
// (a kubelet may not be newer than its apiserver).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
