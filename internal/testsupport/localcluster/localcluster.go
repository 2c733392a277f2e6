// Package localcluster creates and deletes local clusters for tests: a real
// control plane with kwok as a fake kubelet, through hack/cluster.sh (which
// runs kwokctl with the binaries in bin/k8s).
package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/example/memcached-operator/internal/testsupport/repo"
)

// Cluster is a running local cluster.
type Cluster struct {
	// Name is the cluster's name; its state is in StateDir.
	Name     string
	StateDir string
	// Kubeconfig is the path of the admin kubeconfig.
	Kubeconfig string
}

// Options tune a new cluster.
type Options struct {
	// AuditUser, when set, makes the apiserver log that user's requests.
	AuditUser string
	// FakeNodes is the number of kwok nodes (2 when zero and RealNode is false).
	FakeNodes int
	// RealNode adds a node whose pods run real containers (hack/node.sh):
	// needs root, and the binaries and images of 'make real-node-prerequisites'.
	RealNode bool
	// RealNodeTaints are the real node's taints, as kubelet's --register-with-taints.
	RealNodeTaints string
}

// RealNodeName is the name of the real node (hack/node.sh's NODE_NAME).
const RealNodeName = "real-node"

// Create creates a cluster named name, with its state in a fresh temporary
// folder, and waits until it serves. Its control plane is of
// repo.KubeVersion ($KUBE_VERSION, else the default), and the kubelet of
// its real node, if any, of repo.NodeVersion: both checked.
func Create(ctx context.Context, name string, opts Options) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "memcached-operator-"+name+"-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: name, StateDir: dir, Kubeconfig: filepath.Join(dir, name+".kubeconfig")}
	realNode := "0"
	if opts.RealNode {
		realNode = "1"
	}
	env := []string{"AUDIT_USER=" + opts.AuditUser, "REAL_NODE=" + realNode, "REAL_NODE_TAINTS=" + opts.RealNodeTaints}
	if opts.FakeNodes > 0 || opts.RealNode {
		env = append(env, fmt.Sprintf("NODES=%d", opts.FakeNodes))
	}
	if _, err := c.script(ctx, env, "up"); err != nil {
		_, _ = c.script(context.Background(), nil, "down")
		_ = os.RemoveAll(dir)
		return nil, err
	}
	cfg, err := c.Config()
	if err == nil {
		err = repo.CheckServerVersion(cfg)
	}
	if err == nil && opts.RealNode {
		err = repo.CheckNodeVersion(ctx, cfg, RealNodeName)
	}
	if err != nil {
		_ = c.Delete(context.Background())
		return nil, err
	}
	return c, nil
}

// Delete deletes the cluster, stopping every process it started, and
// removes its state.
func (c *Cluster) Delete(ctx context.Context) error {
	// kwokctl kills what each PID file names: none names another's process.
	if err := c.forgetStopped(); err != nil {
		return err
	}
	if _, err := c.script(ctx, nil, "down"); err != nil {
		return err
	}
	return os.RemoveAll(c.StateDir)
}

// Config is a client configuration for the cluster's admin.
func (c *Cluster) Config() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = -1, -1 // no client-side rate limit in tests
	return cfg, nil
}

// KwokWorkdir is kwokctl's state folder (KWOK_WORKDIR): the cluster's
// components, PID files and logs are under clusters/<Name>/ there.
func (c *Cluster) KwokWorkdir() string {
	return filepath.Join(c.StateDir, "kwok")
}

// HoldAPIServerPort listens on c's kube-apiserver port, which must be
// free (its apiserver killed), until release: kwokctl gives a cluster
// created meanwhile, by a test running beside, ports that are free at the
// time, and one that took this port would keep c's apiserver from starting
// again (seen: "bind: address already in use", then another cluster's
// apiserver answering on it). A listening socket: a socket only bound
// would not bind while the killed apiserver's connections wait in
// TIME_WAIT without SO_REUSEADDR, and with it would not keep others from
// binding. Each connection is reset at once, an unreachable apiserver as
// a refused one is. Release it right before StartStopped.
func (c *Cluster) HoldAPIServerPort() (release func(), err error) {
	cfg, err := c.Config()
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	var ln net.Listener
	// The killed apiserver's socket closes a moment after its exit.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ln, err = net.Listen("tcp", ":"+u.Port()); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("holding the kube-apiserver's port %s: %w", u.Port(), err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = conn.Close()
		}
	}()
	return func() { _ = ln.Close(); <-done }, nil
}

// StartStopped starts the cluster's components that are not running, as
// kwokctl starts a stopped cluster: a test that killed one brings it back.
func (c *Cluster) StartStopped(ctx context.Context) error {
	// kwokctl starts a component only if its PID file names no live
	// process, whichever process that is.
	if err := c.forgetStopped(); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, repo.Path("bin", "k8s", "kwokctl"), "start", "cluster", "--name", c.Name)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.KwokWorkdir())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kwokctl start cluster: %w: %s", err, out)
	}
	return nil
}

// ServiceAccountKubeconfig is a kubeconfig that authenticates as the
// ServiceAccount sa of namespace ns, with a token from the TokenRequest API.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, ns, sa string) ([]byte, error) {
	return c.script(ctx, nil, "sa-kubeconfig", ns, sa)
}

// AuditLog is the path of the apiserver's audit log.
func (c *Cluster) AuditLog(ctx context.Context) (string, error) {
	out, err := c.script(ctx, nil, "audit-log")
	return string(bytes.TrimSpace(out)), err
}

func (c *Cluster) script(ctx context.Context, env []string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, repo.Path("hack", "cluster.sh"), args...)
	cmd.Env = append(os.Environ(), append(env, "CLUSTER_NAME="+c.Name, "STATE_DIR="+c.StateDir)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("hack/cluster.sh %v: %w\n%s%s", args, err, out, stderr.String())
	}
	return out, nil
}
