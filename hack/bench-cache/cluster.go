package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
)

// discover keeps r's servers equal to the ready addresses of the
// memcached port in the EndpointSlices of the Service ns/service, from a
// watch: what a client of the headless Service does to follow its pods
// (docs/benchmarks.md, "Finding the pods"). A pod stops being ready when
// it starts terminating, so the client leaves it before memcached stops.
func discover(ctx context.Context, cs kubernetes.Interface, ns, service string, r *ring) error {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = discoveryv1.LabelServiceName + "=" + service
		}))
	inf := f.Discovery().V1().EndpointSlices()
	lister := inf.Lister()
	update := func() {
		list, err := lister.List(labels.Everything())
		if err != nil {
			return
		}
		_ = r.set(readyAddresses(list))
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { update() },
		UpdateFunc: func(any, any) { update() },
		DeleteFunc: func(any) { update() },
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return fmt.Errorf("EndpointSlices of %s/%s not synced", ns, service)
	}
	update()
	return nil
}

// readyAddresses are host:port of each ready endpoint's memcached port.
func readyAddresses(list []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range list {
		var port int32
		for _, p := range s.Ports {
			if p.Name != nil && *p.Name == desired.PortName && p.Port != nil {
				port = *p.Port
			}
		}
		if port == 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				out = append(out, net.JoinHostPort(a, strconv.Itoa(int(port))))
			}
		}
	}
	return out
}

// converged waits until the Memcached key has rolled out size pods of its
// current template, no other pod is left (terminating ones included), and
// the ring r, if any, holds exactly their addresses.
func converged(ctx context.Context, c client.Client, key client.ObjectKey, size int32, r *ring) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		m := &cachev1alpha1.Memcached{}
		if err := c.Get(ctx, key, m); err != nil {
			return false, err
		}
		if m.Status.ObservedGeneration != m.Generation || !meta.IsStatusConditionTrue(m.Status.Conditions, cachev1alpha1.ConditionAvailable) ||
			m.Status.ReadyReplicas != size {
			return false, nil
		}
		d := &appsv1.StatefulSet{}
		if err := c.Get(ctx, key, d); err != nil {
			return false, nil
		}
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != size || d.Status.Replicas != size ||
			d.Status.ReadyReplicas != size || *d.Spec.Replicas != size || d.Status.CurrentRevision != d.Status.UpdateRevision {
			return false, nil
		}
		pods, err := podsOf(ctx, c, m)
		if err != nil || len(pods) != int(size) {
			return false, err
		}
		if r == nil {
			return true, nil
		}
		var ips []string
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				return false, nil
			}
			ips = append(ips, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(*m.Spec.ContainerPort))))
		}
		return slices.Equal(slices.Sorted(slices.Values(ips)), r.list()), nil
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
