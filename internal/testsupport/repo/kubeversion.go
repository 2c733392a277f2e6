package repo

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// CheckServerVersion fails unless the apiserver of cfg is KubeVersion, so
// that a test run meant for one Kubernetes version never passes on another.
func CheckServerVersion(cfg *rest.Config) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return fmt.Errorf("asking the apiserver its version: %w", err)
	}
	if v.GitVersion != KubeVersion() {
		return fmt.Errorf("the apiserver is Kubernetes %s, the tests were to run on %s (KUBE_VERSION)", v.GitVersion, KubeVersion())
	}
	return nil
}

// CheckNodeVersion fails unless the kubelet of the node named node is
// NodeVersion.
func CheckNodeVersion(ctx context.Context, cfg *rest.Config, node string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s: %w", node, err)
	}
	if got := n.Status.NodeInfo.KubeletVersion; got != NodeVersion() {
		return fmt.Errorf("node %s runs kubelet %s, the tests were to run on %s", node, got, NodeVersion())
	}
	return nil
}
