package main

import (
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
)

// replaced counts the pods of before that are not among after.
func replaced(before, after []corev1.Pod) int {
	now := map[types.UID]bool{}
	for _, p := range after {
		now[p.UID] = true
	}
	n := 0
	for _, p := range before {
		if !now[p.UID] {
			n++
		}
	}
	return n
}

// stayedSlots are the ring names of m's slots whose pod is the same
// before and after an operation.
func stayedSlots(m *cachev1alpha1.Memcached, before, after []corev1.Pod) map[string]bool {
	then := map[string]types.UID{}
	for _, p := range before {
		then[p.Name] = p.UID
	}
	out := map[string]bool{}
	port := strconv.Itoa(int(ptr.Deref(m.Spec.ContainerPort, desired.DefaultContainerPort)))
	for _, p := range after {
		k, err := strconv.Atoi(strings.TrimPrefix(p.Name, m.Name+"-"))
		if err == nil && then[p.Name] == p.UID {
			out[net.JoinHostPort(desired.SlotHost(m.Name, m.Namespace, k), port)] = true
		}
	}
	return out
}

// restartedSlots are the ring names of m's slots whose pod is the same
// before and after an operation and whose memcached restarted in it: its
// container restarted (a new image), or its runner restarted it in the
// container (new settings, the pod's annotation).
func restartedSlots(m *cachev1alpha1.Memcached, before, after []corev1.Pod) map[string]bool {
	was := map[types.UID]corev1.Pod{}
	for _, p := range before {
		was[p.UID] = p
	}
	out := map[string]bool{}
	port := strconv.Itoa(int(ptr.Deref(m.Spec.ContainerPort, desired.DefaultContainerPort)))
	for _, p := range after {
		k, err := strconv.Atoi(strings.TrimPrefix(p.Name, m.Name+"-"))
		b, ok := was[p.UID]
		if err != nil || !ok {
			continue
		}
		settings := desired.AnnotationMemcachedSettings
		if memcachedRestarts(p) > memcachedRestarts(b) || p.Annotations[settings] != b.Annotations[settings] {
			out[net.JoinHostPort(desired.SlotHost(m.Name, m.Namespace, k), port)] = true
		}
	}
	return out
}

// memcachedRestarts is the restart count of p's memcached container.
func memcachedRestarts(p corev1.Pod) int32 {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == desired.ContainerName {
			return s.RestartCount
		}
	}
	return 0
}
