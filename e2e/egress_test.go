//go:build e2e

package e2e

import (
	"context"
	"net"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// reachFromPod runs script in an ephemeral container of pod (the pod's
// network, so its NetworkPolicy), waits until it ends and returns what it
// printed.
func reachFromPod(t *testing.T, cfg *envconf.Config, pod *corev1.Pod, name, script string) string {
	t.Helper()
	g, c, ctx := NewWithT(t), kube(t, cfg), context.Background()
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name:            name,
			Image:           localClientImage,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         []string{"sh", "-c", script},
			SecurityContext: &corev1.SecurityContext{
				RunAsNonRoot:             ptr.To(true),
				RunAsUser:                ptr.To[int64](65534),
				AllowPrivilegeEscalation: ptr.To(false),
				ReadOnlyRootFilesystem:   ptr.To(true),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		},
	})
	g.Expect(c.SubResource("ephemeralcontainers").Update(ctx, pod)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		ended := false
		for _, st := range pod.Status.EphemeralContainerStatuses {
			if st.Name == name && st.State.Terminated != nil {
				ended = true
			}
		}
		g.Expect(ended).To(BeTrue())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "the ephemeral container %s ends", name)
	out, err := kubectl(ctx, cfg, "", "logs", "-n", pod.Namespace, pod.Name, "-c", name)
	g.Expect(err).NotTo(HaveOccurred(), out)
	return out
}

// With its NetworkPolicy on, a Memcached's pods send only to one another on
// memcached's port (the key mover) and to DNS: from inside a pod (an
// ephemeral container shares its network), another slot's memcached is
// reached, a memcached of another Memcached, with no policy of its own, is
// not.
func TestNetworkPolicyLimitsWhatThePodsSend(t *testing.T) {
	t.Parallel()
	f := features.New("a NetworkPolicy limits what the pods send").WithLabel("needs", "containers").
		Assess("from a pod: its peer is reached, another Memcached's pod is not", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("uses the local client image on the real node: local cluster only")
			}
			g, c := NewWithT(t), kube(t, cfg)
			ns, other := namespace(t, cfg, "egress"), namespace(t, cfg, "elsewhere")
			spec := onRealNode(2)
			spec.NetworkPolicy = &cachev1alpha1.NetworkPolicySpec{Enabled: true}
			runningMemcached(t, cfg, client.ObjectKey{Namespace: ns, Name: "fenced"}, spec)
			runningMemcached(t, cfg, client.ObjectKey{Namespace: other, Name: "open"}, onRealNode(1))
			ip := func(ns, name string) string {
				p := &corev1.Pod{}
				g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
				return p.Status.PodIP
			}
			peer, elsewhere := net.JoinHostPort(ip(ns, "fenced-1"), "11211"), net.JoinHostPort(ip(other, "open-0"), "11211")
			// The control: the other memcached serves a pod of the namespace.
			g.Expect(runClient(t, cfg, ns, "control", reachScript(reachOpen, memcachedCommands(elsewhere, "version")))).To(HavePrefix(reachOpen), "a pod without the policy reaches the other memcached")

			src := &corev1.Pod{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fenced-0"}, src)).To(Succeed())
			g.Expect(strings.TrimSpace(reachFromPod(t, cfg, src, "peer", reachScript(reachOpen, memcachedCommands(peer, "version"))))).
				To(HavePrefix(reachOpen), "slot 0 reaches slot 1's memcached")
			g.Expect(strings.TrimSpace(reachFromPod(t, cfg, src, "elsewhere", reachScript(reachClosed, memcachedCommands(elsewhere, "version"))))).
				To(HavePrefix(reachClosed), "slot 0 reaches another Memcached's memcached")
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
