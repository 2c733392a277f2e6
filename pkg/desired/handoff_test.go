package desired

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// With key moves and the warm runner, a pod hands its keys off when
// deleted: both hooks wait for the hand-off in a volume they share, the
// discovery container is told the ring and the clients' poll, and the
// grace period covers the hand-off of a full memcached at the mover's rate
// (290 s for 64 MiB and a poll of 60 s). Without key moves, or without the
// runner, the pod is as before.
func TestADeletedPodHandsItsKeysOffWithinItsGrace(t *testing.T) {
	g := NewWithT(t)
	images := Images{Memcached: "memcached:1", Reloader: "operator:1"}
	m := memcached("cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3),
		KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: "node", ClientPollSeconds: ptr.To[int32](60)}})
	g.Expect(HandsOffOnDeletion(m, images)).To(BeTrue())
	ps := StatefulSet(m, images, SecretDigests{}).Spec.Template.Spec
	g.Expect(*ps.TerminationGracePeriodSeconds).To(Equal(int64(290)))
	g.Expect(ps.Volumes).To(ContainElement(HaveField("Name", HaveValue(Equal(handOffVolume)))))
	for _, c := range ps.Containers {
		switch *c.Name {
		case ContainerName:
			g.Expect(c.Lifecycle.PreStop.Exec.Command).To(Equal([]string{"/opt/memcached-operator/warm", "--await-hand-off=" + handOffDir, "--at-least=10s"}))
			g.Expect(c.VolumeMounts).To(ContainElement(HaveField("MountPath", HaveValue(Equal(handOffDir)))))
		case DiscoveryContainerName:
			g.Expect(c.Lifecycle.PreStop.Exec.Command).To(Equal([]string{"/discovery", "--await-hand-off=" + handOffDir}))
			g.Expect(c.Args).To(ContainElements("--hand-off-dir="+handOffDir, "--ring=node", "--client-poll=1m0s"))
			g.Expect(c.VolumeMounts).To(ContainElement(HaveField("MountPath", HaveValue(Equal(handOffDir)))))
		}
	}

	big := m.DeepCopy()
	big.Spec.MemoryLimitMiB = ptr.To[int32](8192)
	g.Expect(HandOffGraceSeconds(big)).To(BeNumerically("~", 2*(2*(int64(8192)<<20/96)/20000)+150, 2))
	// A memory limit memcached takes in its pod keeps the pod: its grace
	// period is the one it was made with.
	lower := m.DeepCopy()
	lower.Spec.MemoryLimitMiB = ptr.To[int32](48)
	g.Expect(StatefulSet(lower, images, SecretDigests{}).Spec.Template.Annotations[AnnotationPodShape]).
		To(Equal(StatefulSet(m, images, SecretDigests{}).Spec.Template.Annotations[AnnotationPodShape]))

	for _, other := range []*cachev1alpha1.Memcached{
		memcached("cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)}),
		memcached("cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3), MemoryLimitMiB: ptr.To[int32](32), KeyMoves: m.Spec.KeyMoves}),
	} {
		g.Expect(HandsOffOnDeletion(other, images)).To(BeFalse())
		ps := StatefulSet(other, images, SecretDigests{}).Spec.Template.Spec
		g.Expect(*ps.TerminationGracePeriodSeconds).To(Equal(int64(terminationGracePeriodSeconds)))
		g.Expect(*ps.Containers[0].Lifecycle.PreStop.Sleep.Seconds).To(Equal(int64(preStopSleepSeconds)))
	}
}

// spec.keyMoves.keysPerSecond reaches each pod's mover and sizes the grace
// period: at five times the default rate a full memcached's copy and settle
// take a fifth as long. Unset, the mover keeps its default and the pods
// their shape (no flag).
func TestTheMoveRateReachesTheMoverAndSizesTheGrace(t *testing.T) {
	g := NewWithT(t)
	images := Images{Memcached: "memcached:1", Reloader: "operator:1"}
	spec := cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3), MemoryLimitMiB: ptr.To[int32](8192),
		KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: "node", ClientPollSeconds: ptr.To[int32](60)}}
	discoveryArgs := func(m *cachev1alpha1.Memcached) []string {
		for _, c := range StatefulSet(m, images, SecretDigests{}).Spec.Template.Spec.Containers {
			if *c.Name == DiscoveryContainerName {
				return c.Args
			}
		}
		t.Fatal("no discovery container")
		return nil
	}
	unset := memcached("cache", spec)
	g.Expect(discoveryArgs(unset)).NotTo(ContainElement(HavePrefix("--move-rate")))
	g.Expect(MoveRate(unset)).To(Equal(int64(20000)))

	fast := unset.DeepCopy()
	fast.Spec.KeyMoves.KeysPerSecond = ptr.To[int32](100000)
	g.Expect(discoveryArgs(fast)).To(ContainElement("--move-rate=100000"))
	items := int64(8192) << 20 / 96
	g.Expect(HandOffGraceSeconds(fast)).To(Equal(2*((2*items+99999)/100000) + 150))
	g.Expect(HandOffGraceSeconds(fast)).To(BeNumerically("<", HandOffGraceSeconds(unset)))
	// A new rate is a new pod shape: the pods are replaced (with a
	// hand-off), not kept with the mover's old flag.
	shape := func(m *cachev1alpha1.Memcached) string {
		return StatefulSet(m, images, SecretDigests{}).Spec.Template.Annotations[AnnotationPodShape]
	}
	g.Expect(shape(fast)).NotTo(Equal(shape(unset)))

	// A copy of exactly so many seconds is not rounded up: 48 MiB hold
	// 524,288 of the smallest items, two listings of them 1,024 s at
	// 1,024 keys a second.
	exact := memcached("cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3), MemoryLimitMiB: ptr.To[int32](48),
		KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: "node", ClientPollSeconds: ptr.To[int32](60), KeysPerSecond: ptr.To[int32](1024)}})
	g.Expect(HandOffGraceSeconds(exact)).To(Equal(int64(2*1024 + 150)))
}

// The clients' poll is spec.keyMoves.clientPollSeconds, which the hand-off
// waits for and the grace period counts; 60 s where it is unset (the
// CRD's default).
func TestTheClientsPollIsTheSpecsOr60Seconds(t *testing.T) {
	g := NewWithT(t)
	polled := memcached("cache", cachev1alpha1.MemcachedSpec{KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: "node", ClientPollSeconds: ptr.To[int32](10)}})
	g.Expect(ClientPoll(polled)).To(Equal(10 * time.Second))
	g.Expect(handOffArgs(polled)).To(ContainElement("--client-poll=10s"))
	g.Expect(ClientPoll(memcached("cache", cachev1alpha1.MemcachedSpec{KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: "node"}}))).To(Equal(time.Minute))
	g.Expect(ClientPoll(memcached("cache", cachev1alpha1.MemcachedSpec{}))).To(Equal(time.Minute))
}
