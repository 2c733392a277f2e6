//go:build e2e

package e2e

import (
	"context"
	"net"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// A client stores and reads back a value through the headless Service, at
// the address the status gives: memcached really runs. This needs
// real containers (kind); local kwok clusters skip it.
func TestMemcachedServes(t *testing.T) {
	var ns string
	f := features.New("memcached serves").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns = namespace(t, cfg, "serves")
			return ctx
		}).
		Assess("set then get through the address in the status", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
			g.Expect(c.Create(ctx, m)).To(Succeed())
			converged(t, c, client.ObjectKeyFromObject(m), 1)
			got := &cachev1alpha1.Memcached{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			g.Expect(got.Status.Service).NotTo(BeNil())
			host, port, err := net.SplitHostPort(got.Status.Service.Address)
			g.Expect(err).NotTo(HaveOccurred())
			out, err := kubectl(ctx, cfg, "", "run", "client", "-n", ns, "--rm", "-i", "--restart=Never", "--image=busybox:1.36",
				"--", "sh", "-c", `printf 'set greeting 0 0 5\r\nhello\r\nget greeting\r\nquit\r\n' | nc `+host+` `+port)
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("STORED"))
			g.Expect(out).To(ContainSubstring("VALUE greeting 0 5"))
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
