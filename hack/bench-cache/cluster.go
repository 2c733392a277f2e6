package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/clusterdns"
	"github.com/example/memcached-operator/internal/testsupport/localcluster"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
)

// discoverEvery is how often a client asks the discovery endpoint for
// the membership: what the npm client memcached-elasticache is set to in
// the e2e suite; ElastiCache's own clients ask every minute.
const discoverEvery = time.Second

// discover keeps r's servers equal to the membership the Memcached key's
// discovery endpoint (its status.discovery.address) serves, asked every
// discoverEvery as a client with auto discovery asks it
// (docs/benchmarks-cache.md, "Finding the slots"): the endpoint's name
// resolved by the cluster's DNS at dns, each server named in the ring by
// its slot's host name and dialled at the address the membership gives.
// It returns once r holds a first membership; a failed ask later keeps
// the last one, as a client does, and is told on stderr.
func discover(ctx context.Context, c client.Client, key client.ObjectKey, dns string, a access, r *ring) error {
	var endpoint string
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		m := &cachev1alpha1.Memcached{}
		if err := c.Get(ctx, key, m); err != nil {
			return false, err
		}
		if m.Status.Discovery != nil {
			endpoint = m.Status.Discovery.Address
		}
		return endpoint != "", nil
	}); err != nil {
		return fmt.Errorf("waiting for the discovery endpoint of %s: %w", key, err)
	}
	update := func(ctx context.Context) error {
		cl, err := askEndpoint(ctx, dns, endpoint, a)
		if err != nil {
			return err
		}
		members := make([]member, len(cl.Nodes))
		for i, n := range cl.Nodes {
			port := strconv.Itoa(int(n.Port))
			members[i] = member{name: net.JoinHostPort(n.Host, port), addr: net.JoinHostPort(n.IP, port)}
		}
		return r.setMembers(members)
	}
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		last = update(ctx)
		return last == nil, nil
	}); err != nil {
		return fmt.Errorf("asking %s for the membership: %w (%v)", endpoint, err, last)
	}
	go func() {
		told := ""
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(discoverEvery):
			}
			err := update(ctx)
			if err != nil && ctx.Err() == nil && err.Error() != told {
				fmt.Fprintf(os.Stderr, "   discovery endpoint %s: %v; keeping the last membership\n", endpoint, err)
			}
			if err == nil {
				told = ""
			} else {
				told = err.Error()
			}
		}
	}()
	return nil
}

// askEndpoint resolves the endpoint's name with the cluster's DNS at dns,
// as a pod of the cluster does, and asks its addresses in turn until one
// answers.
func askEndpoint(ctx context.Context, dns, endpoint string, a access) (discovery.Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		return discovery.Cluster{}, err
	}
	ips, err := clusterdns.Lookup(ctx, dns, host)
	if err != nil {
		return discovery.Cluster{}, err
	}
	err = fmt.Errorf("%s has no address", host)
	for _, ip := range ips {
		var conn net.Conn
		if conn, err = a.dial(ctx, "tcp", net.JoinHostPort(ip, port)); err != nil {
			continue
		}
		dl, _ := ctx.Deadline()
		_ = conn.SetDeadline(dl)
		c, askErr := discovery.Ask(conn)
		conn.Close()
		if err = askErr; err == nil {
			return c, nil
		}
	}
	return discovery.Cluster{}, err
}

// realNodeIP is the real node's address, where the cluster's DNS (CoreDNS)
// answers.
func realNodeIP(ctx context.Context, c client.Client) (string, error) {
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: localcluster.RealNodeName}, n); err != nil {
		return "", err
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address, nil
		}
	}
	return "", fmt.Errorf("node %s has no InternalIP", n.Name)
}

// converged waits until the Memcached key has rolled out size pods of its
// current template (its status says so too), no other pod is left (terminating ones included), and
// the ring r, if any, holds exactly their addresses, each named by its
// pod's slot.
func converged(ctx context.Context, c client.Client, key client.ObjectKey, size int32, r *ring) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		m := &cachev1alpha1.Memcached{}
		if err := c.Get(ctx, key, m); err != nil {
			return false, err
		}
		if m.Status.ObservedGeneration != m.Generation || !meta.IsStatusConditionTrue(m.Status.Conditions, cachev1alpha1.ConditionAvailable) ||
			!meta.IsStatusConditionFalse(m.Status.Conditions, cachev1alpha1.ConditionProgressing) || m.Status.ReadyReplicas != size {
			// Progressing: a pod whose memcached restarts in place is
			// updated and ready until the kubelet stops it.
			return false, nil
		}
		d := &appsv1.StatefulSet{}
		if err := c.Get(ctx, key, d); err != nil {
			return false, nil
		}
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != size || d.Status.Replicas != size ||
			d.Status.ReadyReplicas != size || *d.Spec.Replicas != size || (d.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType && d.Status.CurrentRevision != d.Status.UpdateRevision) {
			return false, nil
		}
		pods, err := podsOf(ctx, c, m)
		if err != nil || len(pods) != int(size) {
			return false, err
		}
		if r == nil {
			return true, nil
		}
		port := strconv.Itoa(int(*m.Spec.ContainerPort))
		want := map[string]string{}
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				return false, nil
			}
			k, err := strconv.Atoi(strings.TrimPrefix(p.Name, m.Name+"-"))
			if err != nil {
				return false, fmt.Errorf("pod %s is not in a slot of %s", p.Name, m.Name)
			}
			want[net.JoinHostPort(desired.SlotHost(m.Name, m.Namespace, k), port)] = net.JoinHostPort(p.Status.PodIP, port)
		}
		return maps.Equal(want, r.byName()), nil
	})
}

// podsOf are the Memcached's pods, terminating ones included.
func podsOf(ctx context.Context, c client.Client, m *cachev1alpha1.Memcached) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	err := c.List(ctx, list, client.InNamespace(m.Namespace), client.MatchingLabels(desired.SelectorLabels(m)))
	return list.Items, err
}

// deleteAndWait deletes obj and waits until it is gone, with what it owns
// (its pods, which share the node's CPU with what is measured next).
func deleteAndWait(ctx context.Context, c client.Client, m *cachev1alpha1.Memcached) error {
	if err := c.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := podsOf(ctx, c, m)
		if err != nil {
			return false, err
		}
		err = c.Get(ctx, client.ObjectKeyFromObject(m), &cachev1alpha1.Memcached{})
		return apierrors.IsNotFound(err) && len(pods) == 0, nil
	})
}

// hostMemcached runs the memcached binary the node's image holds
// (Debian's, hack/images.sh), directly on this machine with the
// operator's default command line (memcached's own defaults), on a free
// loopback port: the limit the pods are compared with.
type hostMemcached struct {
	cmd  *exec.Cmd
	addr string
	// cgroup is the CPU cgroup it runs in ("" when none was made).
	cgroup string
}

func startHostMemcached(ctx context.Context) (*hostMemcached, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	l.Close()
	// As in the pod: memcached --port=<port>, nothing else changed; -u
	// because memcached refuses to run as root, -l to stay on loopback.
	cmd := exec.Command("/usr/bin/memcached", "--port="+port, "-u", "nobody", "-l", "127.0.0.1")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("memcached on the host (make node-packages installs it): %w", err)
	}
	h := &hostMemcached{cmd: cmd, addr: addr}
	if h.cgroup, err = sameShareAsPods(cmd.Process.Pid); err != nil {
		h.stop()
		return nil, err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil, nil
	})
	if err != nil {
		h.stop()
		return nil, fmt.Errorf("memcached on the host did not answer on %s", addr)
	}
	return h, nil
}

func (h *hostMemcached) stop() {
	_ = h.cmd.Process.Kill()
	_ = h.cmd.Wait()
	if h.cgroup != "" {
		_ = os.Remove(h.cgroup)
	}
}

// cpuRoot is the cgroup v1 CPU hierarchy, where the kubelet puts every pod
// under kubepods.
const cpuRoot = "/sys/fs/cgroup/cpu"

// sameShareAsPods moves pid into a CPU cgroup of its own beside the
// kubelet's kubepods, with the same cpu.shares: the scheduler then weighs
// memcached on the host against the client as it weighs the pods' (all
// of which are in kubepods) against it. Without that, the pods' memcached
// would be one group of 2048 shares against each of the client's threads
// at 1024, and the host's one thread among equals: a difference of the
// run's setup, not of the pods. It returns the cgroup, or "" where there
// is no cgroup v1 kubepods to copy (then nothing is moved, and the report
// says so).
func sameShareAsPods(pid int) (string, error) {
	shares, err := os.ReadFile(filepath.Join(cpuRoot, "kubepods", "cpu.shares"))
	if err != nil {
		return "", nil
	}
	dir := filepath.Join(cpuRoot, "bench-cache-memcached")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.shares"), shares, 0o644); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}
