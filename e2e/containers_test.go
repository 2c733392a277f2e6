//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/repo"
	"github.com/example/memcached-operator/pkg/desired"
)

// The features of this file run real containers: on the local cluster's
// real node (hack/node.sh), with the images hack/images.sh builds, or on
// kind with public images.

// Images of the real node, made by hack/images.sh (never pulled).
var (
	localMemcachedImage       = repo.Version("LOCAL_MEMCACHED_IMAGE")
	localMemcachedImageByName = repo.Version("LOCAL_MEMCACHED_IMAGE_MINOR")
	localClientImage          = repo.Version("LOCAL_CLIENT_IMAGE")
	localExporterImage        = repo.Version("LOCAL_EXPORTER_IMAGE")
)

// exporterImage is the exporter image of the operators the suite runs.
func exporterImage() string {
	if provider == "local" {
		return localExporterImage
	}
	return desired.DefaultExporterImage
}

const (
	realNodeLabel = "memcached-operator.example.com/real-node"
	// realNodeContainerd is the real node's containerd socket (hack/node.sh).
	realNodeContainerd = "/run/memcached-operator-real-node/containerd.sock"
)

// memcachedImages are two references of a memcached image, for a rollout
// from the first to the second.
func memcachedImages() (string, string) {
	if provider == "local" {
		return localMemcachedImage, localMemcachedImageByName
	}
	return desired.DefaultImage, "memcached:1.6.38-alpine"
}

// onRealNode is a Memcached spec of size pods that run real containers: on
// the local cluster, placed on the real node, which is tainted.
func onRealNode(size int32) cachev1alpha1.MemcachedSpec {
	image, _ := memcachedImages()
	spec := cachev1alpha1.MemcachedSpec{Size: ptr.To(size), Image: image}
	if provider == "local" {
		spec.NodeSelector = map[string]cachev1alpha1.LabelValue{realNodeLabel: "true"}
		spec.Tolerations = []cachev1alpha1.Toleration{{Key: realNodeTaint, Operator: "Exists", Effect: "NoSchedule"}}
	}
	return spec
}

// podOnRealNode makes ps run on the real node (local cluster only).
func podOnRealNode(ps *corev1.PodSpec) {
	if provider == "local" {
		ps.NodeSelector = map[string]string{realNodeLabel: "true"}
		ps.Tolerations = []corev1.Toleration{{Key: realNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
}

// runClient runs script in a busybox pod in ns, waits until it ends and
// returns what it printed. The pod meets the restricted Pod Security
// Standard, so it runs in any namespace.
func runClient(t *testing.T, cfg *envconf.Config, ns, name, script string) string {
	t.Helper()
	g, c, ctx := NewWithT(t), kube(t, cfg), context.Background()
	image := "busybox:1.36"
	if provider == "local" {
		image = localClientImage
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](65534),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            "client",
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sh", "-c", script},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	podOnRealNode(&pod.Spec)
	g.Expect(c.Create(ctx, pod)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(BeElementOf(corev1.PodSucceeded, corev1.PodFailed))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "client pod %s/%s ends", ns, name)
	out, err := kubectl(ctx, cfg, "", "logs", "-n", ns, name)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded), "client output:\n%s", out)
	return out
}

// memcachedCommands is a shell command that sends memcached's ASCII
// protocol lines to addr ("host:port") and prints the replies.
func memcachedCommands(addr string, lines ...string) string {
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf(`printf '%s\r\nquit\r\n' | nc %s %s`, strings.Join(lines, `\r\n`), host, port)
}

// runningMemcached creates the Memcached key with spec and waits until it
// has converged.
func runningMemcached(t *testing.T, cfg *envconf.Config, key client.ObjectKey, spec cachev1alpha1.MemcachedSpec) {
	t.Helper()
	c := kube(t, cfg)
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Spec: spec}
	NewWithT(t).Expect(c.Create(context.Background(), m)).To(Succeed())
	converged(t, c, key, *spec.Size)
}

func serviceAddress(t *testing.T, c client.Client, key client.ObjectKey) string {
	t.Helper()
	m := &cachev1alpha1.Memcached{}
	NewWithT(t).Expect(c.Get(context.Background(), key, m)).To(Succeed())
	NewWithT(t).Expect(m.Status.Service).NotTo(BeNil(), "status.service")
	return m.Status.Service.Address
}

// A client pod stores and reads back a value at the address in the status:
// a name that cluster DNS resolves to the headless Service's pod. memcached
// really runs.
func TestMemcachedServes(t *testing.T) {
	var ns string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "cache"} }
	f := features.New("memcached serves").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns = namespace(t, cfg, "serves")
			runningMemcached(t, cfg, key(), onRealNode(1))
			return ctx
		}).
		Assess("set then get through the address in the status", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			addr := serviceAddress(t, kube(t, cfg), key())
			out := runClient(t, cfg, ns, "client", memcachedCommands(addr, "set greeting 0 0 5", "hello", "get greeting"))
			g := NewWithT(t)
			g.Expect(out).To(ContainSubstring("STORED"))
			// Container logs keep lines, not memcached's \r.
			g.Expect(out).To(MatchRegexp(`VALUE greeting 0 5\r?\nhello\r?\n`))
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// The spec's memory, connection and thread settings are what memcached
// itself reports.
func TestMemcachedSettings(t *testing.T) {
	var ns string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "tuned"} }
	f := features.New("memcached runs with the spec's settings").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns = namespace(t, cfg, "settings")
			spec := onRealNode(1)
			spec.MemoryLimitMiB, spec.MaxConnections, spec.Threads = ptr.To[int32](48), ptr.To[int32](321), ptr.To[int32](3)
			runningMemcached(t, cfg, key(), spec)
			return ctx
		}).
		Assess("stats settings answers maxbytes, maxconns and num_threads as asked", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			out := runClient(t, cfg, ns, "stats", memcachedCommands(serviceAddress(t, kube(t, cfg), key()), "stats settings"))
			g := NewWithT(t)
			g.Expect(out).To(MatchRegexp(`(?m)^STAT maxbytes %d\r?$`, 48<<20))
			g.Expect(out).To(MatchRegexp(`(?m)^STAT maxconns 321\r?$`))
			g.Expect(out).To(MatchRegexp(`(?m)^STAT num_threads 3\r?$`))
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// servingPods counts the pods of the Memcached that are Ready, not being
// deleted, and answer memcached's version command at their address. It dials
// pod addresses, which the local cluster's host reaches through the bridge.
func servingPods(ctx context.Context, c client.Client, ns string, selector map[string]string) (int, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(selector)}); err != nil {
		return 0, err
	}
	serving := 0
	for _, p := range pods.Items {
		ready := false
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready || p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue
		}
		if answersVersion(net.JoinHostPort(p.Status.PodIP, fmt.Sprint(desired.DefaultContainerPort))) {
			serving++
		}
	}
	return serving, nil
}

func answersVersion(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("version\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "VERSION ")
}

// An image change rolls the pods one at a time on real readiness: at every
// moment during the rollout at least size-1 pods are Ready and answer.
func TestRollingImageChangeKeepsServing(t *testing.T) {
	var ns string
	const size = 3
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "rolling"} }
	f := features.New("an image change keeps the cache serving").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("counts serving pods by dialing pod addresses from this machine: local cluster only")
			}
			ns = namespace(t, cfg, "rolling")
			runningMemcached(t, cfg, key(), onRealNode(size))
			return ctx
		}).
		Assess("at least size-1 pods serve throughout", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			m := &cachev1alpha1.Memcached{}
			g.Expect(c.Get(ctx, key(), m)).To(Succeed())
			selector := desired.SelectorLabels(m)
			n, err := servingPods(ctx, c, ns, selector)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n).To(Equal(size), "every pod serves before the change")

			// Sample until the rollout has converged on the new image.
			var (
				mu              sync.Mutex
				samples, lowest = 0, size
			)
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if n, err := servingPods(ctx, c, ns, selector); err == nil {
						mu.Lock()
						samples++
						lowest = min(lowest, n)
						mu.Unlock()
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
			_, next := memcachedImages()
			patch := fmt.Sprintf(`{"spec":{"image":%q}}`, next)
			g.Expect(c.Patch(ctx, m, client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())
			_, d := converged(t, c, key(), size)
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(next))
			NewWithT(t).Eventually(func(g Gomega) {
				pods := &corev1.PodList{}
				g.Expect(c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(selector))).To(Succeed())
				g.Expect(pods.Items).To(HaveLen(size), "old pods gone")
				for _, p := range pods.Items {
					g.Expect(p.Spec.Containers[0].Image).To(Equal(next))
				}
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			close(stop)
			<-done
			mu.Lock()
			defer mu.Unlock()
			t.Logf("rollout: %d samples, fewest serving pods %d of %d", samples, lowest, size)
			g.Expect(samples).To(BeNumerically(">", 5), "sampled during the rollout")
			g.Expect(lowest).To(BeNumerically(">=", size-1))
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// A Memcached in a namespace that enforces the restricted Pod Security
// Standard runs: its pods are admitted and serve.
func TestRestrictedNamespace(t *testing.T) {
	var ns string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "cache"} }
	f := features.New("restricted namespace").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns = namespace(t, cfg, "restricted")
			g, c := NewWithT(t), kube(t, cfg)
			nsObj := &corev1.Namespace{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
			g.Expect(c.Patch(ctx, nsObj, client.RawPatch("application/merge-patch+json",
				[]byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted","pod-security.kubernetes.io/enforce-version":"latest"}}}`)))).To(Succeed())
			return ctx
		}).
		Assess("its pods are admitted, turn Ready and serve", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key().Name}, Spec: onRealNode(2)}
			g.Expect(c.Create(ctx, m)).To(Succeed())
			converged(t, c, key(), 2)
			out := runClient(t, cfg, ns, "client", memcachedCommands(serviceAddress(t, c, key()), "set k 0 0 1", "v", "get k"))
			g.Expect(out).To(ContainSubstring("VALUE k 0 1"))
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// A memcached container that dies is restarted by the kubelet; meanwhile the
// Memcached reports it: not Available, no ready pod; then Available again.
// (Degraded stays False: a restarted pod is not a stalled rollout.)
func TestContainerKilledIsReported(t *testing.T) {
	var ns string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "fragile"} }
	f := features.New("a killed memcached is restarted and reported").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("kills the container through the real node's containerd: local cluster only")
			}
			ns = namespace(t, cfg, "killed")
			runningMemcached(t, cfg, key(), onRealNode(1))
			return ctx
		}).
		Assess("Available goes False and back to True", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			m := &cachev1alpha1.Memcached{}
			g.Expect(c.Get(ctx, key(), m)).To(Succeed())
			pods := &corev1.PodList{}
			g.Expect(c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(desired.SelectorLabels(m)))).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			pod := pods.Items[0]
			id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")

			// Watch the Memcached from before the kill, so no status is missed.
			w, err := c.Watch(ctx, &cachev1alpha1.MemcachedList{}, client.InNamespace(ns))
			g.Expect(err).NotTo(HaveOccurred())
			defer w.Stop()

			out, err := exec.CommandContext(ctx, "ctr", "--address", realNodeContainerd, "--namespace", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", id).CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), string(out))
			t.Logf("killed container %s of pod %s", id, pod.Name)

			sawDown, sawBack := false, false
			deadline := time.After(timeout)
			for !sawBack {
				select {
				case ev, ok := <-w.ResultChan():
					g.Expect(ok).To(BeTrue(), "watch closed")
					got, isMemcached := ev.Object.(*cachev1alpha1.Memcached)
					if !isMemcached || got.Name != key().Name {
						continue
					}
					available := meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionAvailable)
					if !available && got.Status.ReadyReplicas == 0 {
						if !sawDown {
							c := meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionAvailable)
							t.Logf("reported: Available=%s %s: %s", c.Status, c.Reason, c.Message)
						}
						sawDown = true
					}
					if sawDown && available && got.Status.ReadyReplicas == 1 {
						sawBack = true
					}
				case <-deadline:
					t.Fatalf("after the kill: saw not Available: %v, saw Available again: %v", sawDown, sawBack)
				}
			}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(&pod), &pod)).To(Succeed())
			g.Expect(pod.Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">=", 1), "the kubelet restarted the container")
			g.Expect(meta.IsStatusConditionFalse(mustGet(t, c, key()).Status.Conditions, cachev1alpha1.ConditionDegraded)).To(BeTrue())
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

func mustGet(t *testing.T, c client.Client, key client.ObjectKey) *cachev1alpha1.Memcached {
	t.Helper()
	m := &cachev1alpha1.Memcached{}
	NewWithT(t).Expect(c.Get(context.Background(), key, m)).To(Succeed())
	return m
}

// The operator itself runs as a pod, installed from manifests/default with
// the image built from the Dockerfile: in-cluster configuration, its
// ServiceAccount and RBAC, leader election, probes; its metrics answer over
// HTTPS to an authorized token and refuse a request without one. The host
// operator stands aside meanwhile.
func TestOperatorInCluster(t *testing.T) {
	const (
		system     = "memcached-operator-system"
		deployment = "memcached-operator-controller-manager"
		metricsSvc = "memcached-operator-controller-manager-metrics"
	)
	var ns string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "managed-in-cluster"} }
	f := features.New("the operator runs in the cluster").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("kind deploys the operator in the cluster for the whole suite")
			}
			g := NewWithT(t)
			ns = namespace(t, cfg, "in-cluster")
			g.Expect(operator.Stop()).To(Succeed())
			t.Cleanup(func() {
				_, _ = kubectl(context.Background(), cfg, "", "delete", "deployment", "-n", system, deployment, "--wait=true", "--timeout=2m")
				op, err := runOperator(cfg)
				if err != nil {
					t.Errorf("restarting the host operator: %v", err)
					return
				}
				operator = op
			})
			_, err := deployOperator(ctx, cfg)
			g.Expect(err).NotTo(HaveOccurred())
			return ctx
		}).
		Assess("it holds the leader Lease and reconciles a Memcached to Available", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			pods := &corev1.PodList{}
			g.Eventually(func(g Gomega) {
				g.Expect(c.List(ctx, pods, client.InNamespace(system), client.MatchingLabels{"app.kubernetes.io/component": "manager"})).To(Succeed())
				g.Expect(pods.Items).To(HaveLen(1), "the rollout's first pod, which no node could take, is gone")
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			t.Logf("operator pod %s on node %s", pods.Items[0].Name, pods.Items[0].Spec.NodeName)
			if provider == "local" {
				g.Expect(pods.Items[0].Spec.NodeName).To(Equal("real-node"))
			}
			out, err := kubectl(ctx, cfg, "", "get", "lease", "-n", system, "memcached-operator.cache.example.com", "-o", "jsonpath={.spec.holderIdentity}")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(HavePrefix(pods.Items[0].Name), "the pod holds the leader Lease")

			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key().Name}, Spec: onRealNode(1)}
			g.Expect(c.Create(ctx, m)).To(Succeed())
			converged(t, c, key(), 1)
			return ctx
		}).
		Assess("its metrics answer an authorized token over HTTPS and refuse an anonymous request", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			svc := &corev1.Service{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: system, Name: metricsSvc}, svc)).To(Succeed())
			// Through the Service's cluster IP: kube-proxy's rules on this machine.
			url := fmt.Sprintf("https://%s/metrics", net.JoinHostPort(svc.Spec.ClusterIP, "8443"))

			for _, cmd := range [][]string{
				{"create", "serviceaccount", "-n", ns, "scraper"},
				{"create", "clusterrolebinding", ns + "-scraper", "--clusterrole=memcached-operator-metrics-reader", "--serviceaccount=" + ns + ":scraper"},
				{"create", "serviceaccount", "-n", ns, "stranger"},
			} {
				out, err := kubectl(ctx, cfg, "", cmd...)
				g.Expect(err).NotTo(HaveOccurred(), out)
			}
			t.Cleanup(func() { _, _ = kubectl(context.Background(), cfg, "", "delete", "clusterrolebinding", ns+"-scraper") })
			token := func(sa string) string {
				out, err := kubectl(ctx, cfg, "", "create", "token", "-n", ns, sa)
				g.Expect(err).NotTo(HaveOccurred(), out)
				return strings.TrimSpace(out)
			}
			scraper, stranger := token("scraper"), token("stranger")

			// The operator serves a self-signed certificate by default.
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
			get := func(token string) (int, string) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := hc.Do(req)
				if err != nil {
					return 0, err.Error()
				}
				defer resp.Body.Close()
				var b strings.Builder
				_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
				return resp.StatusCode, b.String()
			}
			g.Eventually(func(g Gomega) {
				code, body := get(scraper)
				g.Expect(code).To(Equal(http.StatusOK), body)
				g.Expect(body).To(ContainSubstring(`controller_runtime_reconcile_total{controller="memcached"`))
			}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
			code, body := get("")
			g.Expect(code).To(Equal(http.StatusUnauthorized), body)
			code, body = get(stranger)
			g.Expect(code).To(Equal(http.StatusForbidden), body)
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
