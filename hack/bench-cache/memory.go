package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/memcachedconn"
)

// memoryName is the Memcached whose pod's memory is measured at a full
// cache: one pod, memcached's memory limit memoryMiB, its container's
// memoryLimitMiB, so that the pod runs memcached warm (if the operator has
// its image: not with -no-reloader, which measures the pod without it).
const (
	memoryName      = "memory"
	memoryMiB       = 256
	memoryContainer = "384Mi"
	// memoryValue is the size of each value stored to fill the cache.
	memoryValue = 1000
)

// memorySample is what the memory cgroups of the pod and of its memcached
// container say, and what memcached holds, at one moment.
type memorySample struct {
	when string
	// pod and container are memory.usage_in_bytes and memory.stat of the
	// pod's cgroup and of memcached's container's (cgroup v1, the real
	// node's).
	pod, container          uint64
	podStat, containerStat  map[string]uint64
	items, bytes, evictions uint64
}

// memoryMeasure is the memory step's result.
type memoryMeasure struct {
	warm    bool
	samples []memorySample
}

// memory fills a one-pod Memcached past its memory limit and reads the
// memory cgroups of its pod on the real node (this machine): at a full
// cache, then, where memcached runs warm, after an image change restarted
// memcached in place.
func (e *env) memory(ctx context.Context) (*memoryMeasure, error) {
	fmt.Fprintln(os.Stderr, "== memory: a pod at a full cache")
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: memoryName}, Spec: cachev1alpha1.MemcachedSpec{
		Size:           ptr.To[int32](1),
		MemoryLimitMiB: ptr.To[int32](memoryMiB),
		Resources: &corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memoryContainer)},
		},
	}}
	if err := e.c.Create(ctx, m); err != nil {
		return nil, err
	}
	defer func() { _ = deleteAndWait(context.Background(), e.c, m) }()
	pod, err := servingPod(ctx, e.c, m, "")
	if err != nil {
		return nil, err
	}
	out := &memoryMeasure{warm: pod.Annotations[desired.AnnotationPodShape] != ""}
	addr := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(desired.DefaultContainerPort)))
	// 20% more than the limit: memcached evicts, and is full.
	if err := fillMemory(ctx, addr, memoryMiB<<20*12/10/memoryValue); err != nil {
		return nil, err
	}
	s, err := sampleMemory(ctx, "full cache", pod, addr)
	if err != nil {
		return nil, err
	}
	out.samples = append(out.samples, s)
	if !out.warm {
		return out, nil
	}
	fmt.Fprintln(os.Stderr, "== memory: after memcached restarted in place")
	image := repo.Version("LOCAL_MEMCACHED_IMAGE_MINOR")
	if err := e.c.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"image":"`+image+`"}}`))); err != nil {
		return nil, err
	}
	if pod, err = servingPod(ctx, e.c, m, memcachedID(pod)); err != nil {
		return nil, err
	}
	s, err = sampleMemory(ctx, "after an image change restarted memcached in place", pod, addr)
	if err != nil {
		return nil, err
	}
	out.samples = append(out.samples, s)
	return out, nil
}

// servingPod waits until m's one pod is ready, on another memcached
// container than was (if set), with no restart in place awaited, and
// returns it.
func servingPod(ctx context.Context, c client.Client, m *cachev1alpha1.Memcached, was string) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := podsOf(ctx, c, m)
		if err != nil || len(pods) != 1 {
			return false, err
		}
		p := pods[0]
		if _, restarting := p.Annotations[desired.AnnotationRestartingFrom]; restarting || p.Status.PodIP == "" {
			return false, nil
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == desired.ContainerName && s.Ready && s.ContainerID != was {
				pod = &p
				return true, nil
			}
		}
		return false, nil
	})
	return pod, err
}

// fillMemory stores n values of memoryValue bytes in the memcached at addr.
func fillMemory(ctx context.Context, addr string, n int) error {
	conn, err := memcachedconn.Dial(ctx, memcachedconn.Options{Address: addr})
	if err != nil {
		return err
	}
	defer conn.Close()
	w := bufio.NewWriterSize(conn, 1<<20)
	value := strings.Repeat("v", memoryValue)
	for i := range n {
		fmt.Fprintf(w, "set memory-%d 0 0 %d noreply\r\n%s\r\n", i, memoryValue, value)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	// Answered once every set before it is done.
	_, err = memcachedconn.Command(conn, "version\r\n")
	return err
}

// sampleMemory reads the pod's memory cgroups and memcached's stats.
func sampleMemory(ctx context.Context, when string, pod *corev1.Pod, addr string) (memorySample, error) {
	s := memorySample{when: when}
	dir, err := podCgroup("memory", pod.UID)
	if err != nil {
		return s, err
	}
	_, id, _ := strings.Cut(memcachedID(pod), "://")
	if s.pod, s.podStat, err = readMemoryCgroup(dir); err != nil {
		return s, err
	}
	if s.container, s.containerStat, err = readMemoryCgroup(filepath.Join(dir, id)); err != nil {
		return s, err
	}
	conn, err := memcachedconn.Dial(ctx, memcachedconn.Options{Address: addr})
	if err != nil {
		return s, err
	}
	defer conn.Close()
	stats, err := memcachedconn.Stats(conn)
	if err != nil {
		return s, err
	}
	s.items, _ = strconv.ParseUint(stats["curr_items"], 10, 64)
	s.bytes, _ = strconv.ParseUint(stats["bytes"], 10, 64)
	s.evictions, _ = strconv.ParseUint(stats["evictions"], 10, 64)
	return s, nil
}

// memcachedID is the ID of pod's memcached container.
func memcachedID(pod *corev1.Pod) string {
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == desired.ContainerName {
			return st.ContainerID
		}
	}
	return ""
}

// podCgroup is the cgroup (v1) of the pod uid under controller (memory,
// cpuacct) on this machine, in the kubelet's kubepods hierarchy (cgroupfs
// driver).
func podCgroup(controller string, uid types.UID) (string, error) {
	for _, pattern := range []string{"/sys/fs/cgroup/%s/kubepods/pod%s", "/sys/fs/cgroup/%s/kubepods/*/pod%s"} {
		found, err := filepath.Glob(fmt.Sprintf(pattern, controller, uid))
		if err != nil {
			return "", err
		}
		if len(found) == 1 {
			return found[0], nil
		}
	}
	return "", fmt.Errorf("no %s cgroup (v1) of pod %s on this machine", controller, uid)
}

// readMemoryCgroup reads a cgroup v1 memory controller's usage and stats.
func readMemoryCgroup(dir string) (uint64, map[string]uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return 0, nil, err
	}
	usage, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, nil, err
	}
	b, err = os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, nil, err
	}
	stat := map[string]uint64{}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			stat[k], _ = strconv.ParseUint(v, 10, 64)
		}
	}
	return usage, stat, nil
}

// renderMemory is the memory step's part of the report.
func renderMemory(m *memoryMeasure) string {
	var b strings.Builder
	how := "without a memory file (the operator has no image of its own: -no-reloader)"
	if m.warm {
		how = "warm: its memory file on the pod's memory-backed volume"
	}
	fmt.Fprintf(&b, "Memory at a full cache: one pod, memcached `--memory-limit=%d` run %s, its container's limit %s, filled with %d%% of its limit in values of %d bytes; the memory cgroups (v1) of the pod and of memcached's container, read on the real node, in MiB.\n\n",
		memoryMiB, how, memoryContainer, 120, memoryValue)
	b.WriteString("| when | items (evicted) | memcached's bytes | pod: usage | pod: rss | pod: cache (shmem, mapped_file) | memcached's container: usage | its rss | its cache (shmem) |\n|---|---|---|---|---|---|---|---|---|\n")
	mib := func(v uint64) string { return strconv.FormatFloat(float64(v)/(1<<20), 'f', 1, 64) }
	for _, s := range m.samples {
		fmt.Fprintf(&b, "| %s | %d (%d) | %s | %s | %s | %s (%s, %s) | %s | %s | %s (%s) |\n", s.when, s.items, s.evictions, mib(s.bytes),
			mib(s.pod), mib(s.podStat["total_rss"]), mib(s.podStat["total_cache"]), mib(s.podStat["total_shmem"]), mib(s.podStat["total_mapped_file"]),
			mib(s.container), mib(s.containerStat["total_rss"]), mib(s.containerStat["total_cache"]), mib(s.containerStat["total_shmem"]))
	}
	b.WriteString("\n")
	return b.String()
}
