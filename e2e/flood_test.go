//go:build e2e

package e2e

import (
	"context"

	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
)

// The flood: idle connections that send nothing, and connections that
// send a line longer than any command and never end it.
const (
	floodIdle     = 3000
	floodOversize = 200
	// floodMemoryBound bounds the discovery container's memory through
	// the flood: half its limit.
	floodMemoryBound = 16 << 20
)

// containerMemoryPeak is the most memory the container of pod named ever
// used, as its cgroup (v1, on this machine's real node) says.
func containerMemoryPeak(g Gomega, pod *corev1.Pod, name string) int64 {
	id := ""
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == name {
			_, id, _ = strings.Cut(st.ContainerID, "://")
		}
	}
	g.Expect(id).NotTo(BeEmpty(), "container %s's ID", name)
	var found string
	_ = filepath.WalkDir("/sys/fs/cgroup/memory", func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasSuffix(path, id) {
			found = path
			return filepath.SkipAll
		}
		return nil
	})
	g.Expect(found).NotTo(BeEmpty(), "the cgroup of container %s", id)
	b, err := os.ReadFile(filepath.Join(found, "memory.max_usage_in_bytes"))
	g.Expect(err).NotTo(HaveOccurred())
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	g.Expect(err).NotTo(HaveOccurred())
	return v
}

// A flood of connections to a pod's discovery endpoint, from one client:
// thousands idle, hundreds each sending a line of a megabyte it never
// ends. The discovery container stays within half its memory limit, and
// is not restarted,
// another client is served the membership throughout, and memcached
// serves a client of its own.
func TestTheEndpointWithstandsAFlood(t *testing.T) {
	f := features.New("the discovery endpoint withstands a flood").WithLabel("needs", "containers").
		Assess("a flood of idle and oversized connections from one client", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("reads the container's cgroup on this machine's real node: local cluster only")
			}
			g, c := NewWithT(t), kube(t, cfg)
			ns := namespace(t, cfg, "flood")
			key := client.ObjectKey{Namespace: ns, Name: "flood"}
			runningMemcached(t, cfg, key, onRealNode(1))
			pod := &corev1.Pod{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flood-0"}, pod)).To(Succeed())
			endpoint := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(desired.DiscoveryPort)))
			// The membership lists the slot a moment after its pod is
			// ready, once the pod is told of it.
			g.Eventually(func(g Gomega) {
				conn, err := net.DialTimeout("tcp", endpoint, 2*time.Second)
				g.Expect(err).NotTo(HaveOccurred())
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				served, err := discovery.Ask(conn)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(served.Nodes).To(HaveLen(1))
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "the endpoint serves the slot")
			before := containerMemoryPeak(g, pod, desired.DiscoveryContainerName)

			var mu sync.Mutex
			var conns []net.Conn
			accepted := 0
			t.Cleanup(func() {
				for _, conn := range conns {
					conn.Close()
				}
			})
			line := []byte("set " + strings.Repeat("k", 1<<20))
			var wg sync.WaitGroup
			for i := range floodIdle + floodOversize {
				wg.Add(1)
				go func() {
					defer wg.Done()
					conn, err := net.DialTimeout("tcp", endpoint, 5*time.Second)
					if err != nil {
						return
					}
					mu.Lock()
					conns = append(conns, conn)
					accepted++
					mu.Unlock()
					if i >= floodIdle {
						_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
						_, _ = conn.Write(line)
					}
				}()
				if i%100 == 99 {
					time.Sleep(10 * time.Millisecond)
				}
			}
			wg.Wait()
			t.Logf("%d of %d flood connections opened", accepted, floodIdle+floodOversize)

			// Another client, from a pod: served the membership during the
			// flood.
			out := runClient(t, cfg, ns, "asker", memcachedCommands(endpoint, "config get cluster"))
			g.Expect(out).To(ContainSubstring("CONFIG cluster"), "another client asks the endpoint during the flood")
			g.Expect(out).To(ContainSubstring("flood-0.flood." + ns + ".svc"))
			// memcached serves its own clients.
			mc := memcache.New(net.JoinHostPort(pod.Status.PodIP, "11211"))
			g.Expect(mc.Set(&memcache.Item{Key: "during", Value: []byte("the flood")})).To(Succeed())

			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			for _, st := range pod.Status.ContainerStatuses {
				g.Expect(st.RestartCount).To(BeZero(), "container %s restarted", st.Name)
			}
			peak := containerMemoryPeak(g, pod, desired.DiscoveryContainerName)
			t.Logf("the discovery container's memory peak: %.1f MiB before the flood, %.1f MiB through it (limit 32 MiB)",
				float64(before)/(1<<20), float64(peak)/(1<<20))
			// Half the limit: the key mover shares the container. Without
			// the bounds on connections the same flood took it to 29.9 MiB.
			g.Expect(peak).To(BeNumerically("<", floodMemoryBound), "the discovery container's memory peak")
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
