package desired

import (
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// A pod deleted by another hand than the operator's rollout (an eviction,
// a node drain, a delete with a grace period) hands its keys off itself
// (package move's Leaver): the memcached and discovery containers' preStop
// hooks write the leaving file of a volume they share and wait until the
// discovery container has handed the keys to the membership without the
// pod's slot; only then does the kubelet stop them. The pod's grace period
// is what that takes at most (HandOffGraceSeconds).

const (
	// handOffVolume is the directory the hooks and the discovery container
	// share, at handOffDir.
	handOffVolume = "hand-off"
	handOffDir    = "/run/memcached-hand-off"
	handOffSize   = "1Mi"

	// smallestItemBytes is memcached's smallest item (1.6.18's first slab
	// class, of 96 bytes), which bounds how many items its memory holds.
	smallestItemBytes = 96
	// defaultMoveRate is the keys a second the discovery container's mover
	// reads and writes at most without spec.keyMoves.keysPerSecond
	// (cmd/discovery's --move-rate default).
	defaultMoveRate = 20000
	// copyPasses is how often a copy lists the keys (pkg/move's).
	copyPasses = 2
	// publicationWaitSeconds is how long a leaving pod waits, its keys
	// copied, for the operator to publish the membership without it
	// (cmd/discovery's --publication-wait default): the time for an
	// operator on a node being drained too to start again elsewhere.
	publicationWaitSeconds = 60
)

// HandsOffOnDeletion tells whether m's pods hand their keys off when
// deleted: with key moves, where the memcached container holds the warm
// runner, whose --await-hand-off is its preStop hook.
func HandsOffOnDeletion(m *cachev1alpha1.Memcached, images Images) bool {
	return MovesKeys(m) && RunsDiscovery(m, images) && RunsWarm(m, images)
}

// HandOffGraceSeconds is the grace period of m's pods when they hand their
// keys off on deletion: a copy and a settle of as many items as memcached's
// memory holds at most (its smallest items) at the mover's rate, the wait
// for the publication, the clients' poll, and the time memcached has to
// stop after. 290 s for 64 MiB, the default poll of 60 s and the default
// rate.
func HandOffGraceSeconds(m *cachev1alpha1.Memcached) int64 {
	items := int64(memoryLimitMiB(m)) << 20 / smallestItemBytes
	rate := MoveRate(m)
	move := (copyPasses*items + rate - 1) / rate
	return move + publicationWaitSeconds + int64(ClientPoll(m).Seconds()) + move + terminationGracePeriodSeconds
}

// MoveRate is how many keys a second each of m's pods' movers reads and
// writes at most: spec.keyMoves.keysPerSecond, or the mover's default.
func MoveRate(m *cachev1alpha1.Memcached) int64 {
	if m.Spec.KeyMoves == nil || m.Spec.KeyMoves.KeysPerSecond == nil {
		return defaultMoveRate
	}
	return int64(*m.Spec.KeyMoves.KeysPerSecond)
}

// gracePeriodSeconds is m's pods' termination grace period.
func gracePeriodSeconds(m *cachev1alpha1.Memcached, images Images) int64 {
	if HandsOffOnDeletion(m, images) {
		return HandOffGraceSeconds(m)
	}
	return terminationGracePeriodSeconds
}

// handOffArgs are the discovery container's flags of a hand-off.
func handOffArgs(m *cachev1alpha1.Memcached) []string {
	return []string{
		"--hand-off-dir=" + handOffDir,
		"--ring=" + m.Spec.KeyMoves.Ring,
		"--client-poll=" + ClientPoll(m).String(),
	}
}

// memcachedPreStop is the memcached container's preStop hook: with a
// hand-off, the warm runner waits for it, and at least the time for the
// endpoints controller to drop the pod from the Service; otherwise the
// kubelet's own sleep of that time (the memcached image needs no shell).
func memcachedPreStop(m *cachev1alpha1.Memcached, images Images) *corev1ac.LifecycleHandlerApplyConfiguration {
	if !HandsOffOnDeletion(m, images) {
		return corev1ac.LifecycleHandler().WithSleep(corev1ac.SleepAction().WithSeconds(preStopSleepSeconds))
	}
	return corev1ac.LifecycleHandler().WithExec(corev1ac.ExecAction().WithCommand(
		path.Join(warmDir, path.Base(warmCommand)),
		"--await-hand-off="+handOffDir,
		"--at-least="+strconv.Itoa(preStopSleepSeconds)+"s"))
}

// discoveryPreStop is the discovery container's preStop hook: it waits
// for the hand-off, so that the container serves the endpoint and moves
// the keys until then.
func discoveryPreStop() *corev1ac.LifecycleHandlerApplyConfiguration {
	return corev1ac.LifecycleHandler().WithExec(corev1ac.ExecAction().WithCommand(
		discoveryCommand, "--await-hand-off="+handOffDir))
}

// handOffVolumeOf is the hand-off's directory: the pod's memory, writable
// by both containers.
func handOffVolumeOf() *corev1ac.VolumeApplyConfiguration {
	return corev1ac.Volume().WithName(handOffVolume).WithEmptyDir(corev1ac.EmptyDirVolumeSource().
		WithMedium(corev1.StorageMediumMemory).
		WithSizeLimit(resource.MustParse(handOffSize)))
}

// handOffMount mounts it in a container.
func handOffMount() *corev1ac.VolumeMountApplyConfiguration {
	return corev1ac.VolumeMount().WithName(handOffVolume).WithMountPath(handOffDir)
}
