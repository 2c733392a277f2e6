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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/repo"
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
	return runLabelledClient(t, cfg, ns, name, nil, script)
}

// runLabelledClient is runClient with the pod labelled labels.
func runLabelledClient(t *testing.T, cfg *envconf.Config, ns, name string, labels map[string]string, script string) string {
	t.Helper()
	startLabelledClient(t, cfg, ns, name, labels, script)
	return clientOutput(t, cfg, ns, name)
}

// startClient starts script in a busybox pod in ns, as runClient does, and
// returns once the pod is running.
func startClient(t *testing.T, cfg *envconf.Config, ns, name, script string) {
	t.Helper()
	startLabelledClient(t, cfg, ns, name, nil, script)
}

// startLabelledClient is startClient with the pod labelled labels.
func startLabelledClient(t *testing.T, cfg *envconf.Config, ns, name string, labels map[string]string, script string) {
	t.Helper()
	g, c, ctx := NewWithT(t), kube(t, cfg), context.Background()
	image := "busybox:1.36"
	if provider == "local" {
		image = localClientImage
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
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
		g.Expect(pod.Status.Phase).NotTo(Equal(corev1.PodPending))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "client pod %s/%s starts", ns, name)
}

// clientOutput waits until the client pod name in ns ends, and returns
// what it printed; the pod must succeed.
func clientOutput(t *testing.T, cfg *envconf.Config, ns, name string) string {
	t.Helper()
	g, c, ctx := NewWithT(t), kube(t, cfg), context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
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

// serviceAddress is the address in the status of the Memcached key, once
// the Service's EndpointSlices hold as many ready addresses as the
// Memcached's size: they may lag the StatefulSet's ready count that
// convergence is read from, and a client resolving the name before then
// would find fewer pods (and its DNS cache keep that answer a while).
func serviceAddress(t *testing.T, c client.Client, key client.ObjectKey) string {
	t.Helper()
	g := NewWithT(t)
	m := &cachev1alpha1.Memcached{}
	g.Expect(c.Get(context.Background(), key, m)).To(Succeed())
	g.Expect(m.Status.Service).NotTo(BeNil(), "status.service")
	endpointsReady(t, c, key, *m.Spec.Size)
	return m.Status.Service.Address
}

// endpointsReady waits until the Service of the Memcached key has size
// ready addresses in its EndpointSlices: the cluster's DNS answers for the
// Service and its slots' names from them.
func endpointsReady(t *testing.T, c client.Client, key client.ObjectKey, size int32) {
	t.Helper()
	service := key.Name // the operator's Service has the Memcached's name
	NewWithT(t).Eventually(func(g Gomega) {
		slices := &discoveryv1.EndpointSliceList{}
		g.Expect(c.List(context.Background(), slices, client.InNamespace(key.Namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: service})).To(Succeed())
		ready := map[string]bool{}
		for i := range slices.Items {
			for _, a := range readyAddresses(&slices.Items[i]) {
				ready[a] = true
			}
		}
		g.Expect(ready).To(HaveLen(int(size)), "ready addresses of Service %s", service)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// A client pod stores and reads back a value at the address in the status:
// a name that cluster DNS resolves to the headless Service's pod. memcached
// really runs.
func TestMemcachedServes(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	var ns string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "tuned"} }
	f := features.New("memcached runs with the spec's settings").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns = namespace(t, cfg, "settings")
			c := kube(t, cfg)
			priority := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ns}, Value: 1234}
			NewWithT(t).Expect(c.Create(ctx, priority)).To(Succeed())
			t.Cleanup(func() { _ = c.Delete(context.Background(), priority) })
			spec := onRealNode(1)
			spec.MemoryLimitMiB, spec.MaxConnections, spec.Threads = ptr.To[int32](48), ptr.To[int32](321), ptr.To[int32](3)
			spec.MaxItemSize, spec.Verbosity = "2Mi", ptr.To[int32](1)
			spec.PriorityClassName = priority.Name
			spec.PodLabels = map[string]cachev1alpha1.LabelValue{"example.com/team": "payments"}
			spec.PodAnnotations = map[string]cachev1alpha1.AnnotationValue{"example.com/owner": "payments@example.com"}
			spec.ImagePullSecrets = []cachev1alpha1.ImagePullSecret{{Name: "registry"}}
			runningMemcached(t, cfg, key(), spec)
			return ctx
		}).
		Assess("stats settings answers maxbytes, maxconns, num_threads, item_size_max and verbosity as asked", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			out := runClient(t, cfg, ns, "stats", memcachedCommands(serviceAddress(t, kube(t, cfg), key()), "stats settings"))
			g := NewWithT(t)
			g.Expect(out).To(MatchRegexp(`(?m)^STAT maxbytes %d\r?$`, 48<<20))
			g.Expect(out).To(MatchRegexp(`(?m)^STAT maxconns 321\r?$`))
			g.Expect(out).To(MatchRegexp(`(?m)^STAT num_threads 3\r?$`))
			g.Expect(out).To(MatchRegexp(`(?m)^STAT item_size_max %d\r?$`, 2<<20))
			g.Expect(out).To(MatchRegexp(`(?m)^STAT verbosity 1\r?$`))
			return ctx
		}).
		Assess("the pods carry the labels, annotations, priority and pull secrets asked", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			m := mustGet(t, c, key())
			pods := &corev1.PodList{}
			g.Expect(c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(desired.SelectorLabels(m)))).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			p := pods.Items[0]
			g.Expect(p.Labels).To(HaveKeyWithValue("example.com/team", "payments"))
			g.Expect(p.Annotations).To(HaveKeyWithValue("example.com/owner", "payments@example.com"))
			g.Expect(p.Spec.PriorityClassName).To(Equal(ns))
			g.Expect(p.Spec.Priority).To(Equal(ptr.To[int32](1234)), "the priority admission resolved the class")
			g.Expect(p.Spec.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: "registry"}))
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// An image change rolls the slots one at a time, each only once the one
// before serves again, and a stopping pod serving until it has left the
// Service's endpoints: a client pod that resolves the Service every 100 ms
// and asks every address for memcached's version never finds fewer than
// all slots but one answering, from the first sample where DNS gives all
// size pods (before the change) until after the rollout. A timeline of
// the pods and the Service's EndpointSlices is logged when a sample falls
// short of size.
func TestRollingImageChangeKeepsServing(t *testing.T) {
	var ns string
	const size = 3
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "rolling"} }
	f := features.New("an image change keeps the cache serving").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns = namespace(t, cfg, "rolling")
			runningMemcached(t, cfg, key(), onRealNode(size))
			return ctx
		}).
		Assess("size pods serve throughout", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			m := mustGet(t, c, key())
			host, port, _ := net.SplitHostPort(serviceAddress(t, c, key()))
			// Each sample prints the count of addresses that answer and of
			// those DNS gave ("serving N of ADDRESSES"), with the time and
			// the silent addresses. The probe first waits until DNS gives
			// size addresses that all answer: the Service's endpoints and
			// the cluster DNS may lag the StatefulSet's ready count that
			// convergence is read from. Then it samples for 100 s (the
			// rollout takes less). busybox's nslookup does not search: the
			// name is fully qualified.
			probe := fmt.Sprintf(`sample() {
  n=0; a=0; silent=""
  for ip in $(nslookup %[1]s.cluster.local 2>/dev/null | awk '/^Name:/ {answer=1} answer && /^Address/ {print $NF}'); do
    a=$((a+1))
    if printf 'version\r\nquit\r\n' | nc -w 1 "$ip" %[2]s 2>/dev/null | grep -q '^VERSION '; then n=$((n+1)); else silent="$silent $ip"; fi
  done
}
end=$(( $(date +%%s) + 60 ))
sample
until [ "$n" -eq %[3]d ] && [ "$a" -eq %[3]d ]; do
  echo "before the baseline: $n of $a at $(date +%%T)$silent"
  [ "$(date +%%s)" -lt "$end" ] || exit 1
  sleep 0.1
  sample
done
echo "baseline at $(date +%%T)"
end=$(( $(date +%%s) + 100 ))
while [ "$(date +%%s)" -lt "$end" ]; do
  sample
  echo "serving $n of $a at $(date +%%T)$silent"
  sleep 0.1
done`, host, port, size)
			startClient(t, cfg, ns, "probe", probe)
			g.Eventually(func(g Gomega) {
				out, err := kubectl(ctx, cfg, "", "logs", "-n", ns, "probe")
				g.Expect(err).NotTo(HaveOccurred(), out)
				g.Expect(out).To(ContainSubstring("baseline at "))
			}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed(), "DNS gives the client size addresses that answer")
			selector := desired.SelectorLabels(m)
			stopRecord := recordRollout(t, c, ns, key().Name, selector)
			time.Sleep(5 * time.Second) // samples before the change

			_, next := memcachedImages()
			patch := fmt.Sprintf(`{"spec":{"image":%q}}`, next)
			g.Expect(c.Patch(ctx, m, client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())
			start := time.Now()
			t.Logf("image changed at %s", start.Format("15:04:05"))
			g.Eventually(func(g Gomega) {
				pods := &corev1.PodList{}
				g.Expect(c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(selector))).To(Succeed())
				g.Expect(pods.Items).To(HaveLen(size), "old pods gone")
				for _, p := range pods.Items {
					g.Expect(p.Spec.Containers[0].Image).To(Equal(next))
				}
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			converged(t, c, key(), size)
			rolledOut := time.Now()
			t.Logf("rollout of %d pods took %s", size, rolledOut.Sub(start).Round(time.Second))

			record := stopRecord()
			out := clientOutput(t, cfg, ns, "probe")
			counts := regexp.MustCompile(`(?m)^serving (\d+) of \d+ at (\d\d:\d\d:\d\d).*$`).FindAllStringSubmatch(out, -1)
			g.Expect(len(counts)).To(BeNumerically(">", 100), "sampled throughout:\n%s", out)
			// The probe samples for a fixed time: the rollout must have
			// ended inside it, or its end went unsampled. (The client pod's
			// clock is this machine's, in UTC.)
			lastAt, err := time.Parse(time.TimeOnly, counts[len(counts)-1][2])
			g.Expect(err).NotTo(HaveOccurred())
			endAt, err := time.Parse(time.TimeOnly, rolledOut.UTC().Format(time.TimeOnly))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(!lastAt.Before(endAt) || endAt.Sub(lastAt) > 12*time.Hour).To(BeTrue(),
				"the probe sampled until the rollout ended: last sample at %s, rolled out at %s", counts[len(counts)-1][2], rolledOut.UTC().Format(time.TimeOnly))
			lowest, highest := size, 0
			for _, c := range counts {
				n, _ := strconv.Atoi(c[1])
				lowest, highest = min(lowest, n), max(highest, n)
				if n < size {
					t.Logf("sample: %s", c[0])
				}
			}
			if before := regexp.MustCompile(`(?m)^before the baseline: .*$`).FindAllString(out, -1); len(before) > 0 {
				t.Logf("before the baseline: %d samples, the last %s", len(before), before[len(before)-1])
			}
			t.Logf("%d samples from a client pod, %d to %d serving pods; the Service's slices held %d ready addresses or more",
				len(counts), lowest, highest, record.FewestReady)
			if lowest < size || record.FewestReady < size {
				t.Logf("pods and EndpointSlices:\n%s", strings.Join(record.Timeline, "\n"))
			}
			g.Expect(record.FewestReady).To(BeNumerically(">=", size-1), "the Service never holds fewer than all slots but one")
			g.Expect(lowest).To(BeNumerically(">=", size-1), "one slot at a time out of service, never more")
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// With monitoring on, the exporter beside memcached reports memcached_up 1
// and the item count memcached reports, on the port named metrics of the
// Service. The local cluster has no ServiceMonitor CRD: the Memcached says
// so in its Monitored condition and an event, and serves all the same.
func TestExporterReportsMetrics(t *testing.T) {
	t.Parallel()
	var ns string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "metered"} }
	f := features.New("the exporter reports memcached's metrics").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns = namespace(t, cfg, "metrics")
			spec := onRealNode(1)
			spec.Monitoring = &cachev1alpha1.MonitoringSpec{Enabled: true}
			runningMemcached(t, cfg, key(), spec)
			return ctx
		}).
		Assess("memcached_up is 1 and the item count rises with stored values", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			addr := serviceAddress(t, kube(t, cfg), key())
			host, _, _ := net.SplitHostPort(addr)
			metrics := fmt.Sprintf(`wget -q -O - http://%s/metrics | grep -E '^memcached_(up|current_items) '`, net.JoinHostPort(host, fmt.Sprint(desired.MetricsPort)))
			script := metrics + "; echo ---; " + memcachedCommands(addr, "set a 0 0 1", "1", "set b 0 0 1", "2", "set c 0 0 1", "3") + "; echo ---; " + metrics
			out := runClient(t, cfg, ns, "scrape", script)
			parts := strings.Split(out, "---")
			g := NewWithT(t)
			g.Expect(parts).To(HaveLen(3), out)
			g.Expect(parts[0]).To(MatchRegexp(`(?m)^memcached_up 1$`))
			g.Expect(parts[0]).To(MatchRegexp(`(?m)^memcached_current_items 0$`))
			g.Expect(parts[1]).To(ContainSubstring("STORED"))
			g.Expect(parts[2]).To(MatchRegexp(`(?m)^memcached_current_items 3$`))
			return ctx
		}).
		Assess("without the ServiceMonitor CRD, the Memcached says so and serves", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := kube(t, cfg)
			NewWithT(t).Eventually(func(g Gomega) {
				m := &cachev1alpha1.Memcached{}
				g.Expect(c.Get(ctx, key(), m)).To(Succeed())
				cond := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionMonitored)
				g.Expect(cond).NotTo(BeNil())
				g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(cond.Reason).To(Equal(cachev1alpha1.ReasonServiceMonitorCRDMissing))
				g.Expect(meta.IsStatusConditionTrue(m.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue())
				events := &eventsv1.EventList{}
				g.Expect(c.List(ctx, events, client.InNamespace(ns))).To(Succeed())
				g.Expect(events.Items).To(ContainElement(HaveField("Reason", cachev1alpha1.ReasonServiceMonitorCRDMissing)))
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// A Memcached in a namespace that enforces the restricted Pod Security
// Standard runs: its pods are admitted and serve.
func TestRestrictedNamespace(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
			// memcached's container: the kubelet lists the statuses by name,
			// and the discovery container's comes first.
			i := slices.IndexFunc(pod.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.Name == desired.ContainerName })
			g.Expect(i).To(BeNumerically(">=", 0), "memcached's container status")
			id := strings.TrimPrefix(pod.Status.ContainerStatuses[i].ContainerID, "containerd://")

			// Watch the Memcached from before the kill, so no status is missed.
			w, err := c.Watch(ctx, &cachev1alpha1.MemcachedList{}, client.InNamespace(ns))
			g.Expect(err).NotTo(HaveOccurred())
			defer w.Stop()

			killContainer(ctx, g, id)
			var order []string
			for _, s := range pod.Status.ContainerStatuses {
				order = append(order, s.Name)
			}
			t.Logf("killed memcached's container %s of pod %s (the kubelet lists %v)", id, pod.Name, order)

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
			g.Expect(pod.Status.ContainerStatuses[i].Name).To(Equal(desired.ContainerName))
			g.Expect(pod.Status.ContainerStatuses[i].RestartCount).To(BeNumerically(">=", 1), "the kubelet restarted memcached's container")
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

// hostOperatorStandsAside stops the operator's host process until the test
// ends; then remove runs (to take the test's operator away) and the host
// operator starts again.
func hostOperatorStandsAside(t *testing.T, cfg *envconf.Config, remove func()) {
	t.Helper()
	NewWithT(t).Expect(operator.Stop()).To(Succeed())
	t.Cleanup(func() {
		remove()
		op, err := runOperator(cfg)
		if err != nil {
			t.Errorf("restarting the host operator: %v", err)
			return
		}
		operator = op
	})
}

// The operator itself runs as a pod, installed from manifests/default with
// the image of the Dockerfile's last stage: in-cluster configuration, its
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
			hostOperatorStandsAside(t, cfg, func() {
				_, _ = kubectl(context.Background(), cfg, "", "delete", "deployment", "-n", system, deployment, "--wait=true", "--timeout=2m")
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

			// The reloader of a Memcached with authentication runs from the
			// operator's own image, which the operator read from its pod.
			secured := client.ObjectKey{Namespace: ns, Name: "secured"}
			usersSecret(ctx, t, c, secured, "app", "password")
			spec := onRealNode(1)
			spec.Auth = &cachev1alpha1.AuthSpec{SecretName: "secured-users"}
			g.Expect(c.Create(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secured.Name}, Spec: spec})).To(Succeed())
			_, d := converged(t, c, secured, 1)
			var images []string
			for _, ctr := range d.Spec.Template.Spec.Containers {
				if ctr.Name == desired.ReloaderContainerName {
					images = append(images, ctr.Image)
				}
			}
			g.Expect(images).To(Equal([]string{pods.Items[0].Spec.Containers[0].Image}), "the reloader runs the operator's image")
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
		Assess("its metrics NetworkPolicy admits pods of the namespaces labelled cache.example.com/metrics: enabled and no other", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			pods := &corev1.PodList{}
			g.Expect(c.List(ctx, pods, client.InNamespace(system), client.MatchingLabels{"app.kubernetes.io/component": "manager"})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			// The pod's own address: what a scraper reaches (through the
			// Service too, which only translates the address).
			connect := tcpConnect(pods.Items[0].Status.PodIP, 8443)
			prometheus := labelledNamespace(t, cfg, "prometheus", map[string]string{desired.MetricsNamespaceLabel: desired.MetricsNamespaceValue})
			out := runClient(t, cfg, prometheus, "scraper", reachScript(reachOpen, connect))
			g.Expect(out).To(HavePrefix("open: "))
			out = runClient(t, cfg, ns, "scraper", reachScript(reachClosed, connect))
			g.Expect(out).To(MatchRegexp(refusedByTheNetwork))
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// killContainer kills the container id and every process in it with
// SIGKILL, through the real node's containerd, as the kernel's OOM killer
// or a crash would end it: no one is told first.
func killContainer(ctx context.Context, g Gomega, id string) {
	out, err := exec.CommandContext(ctx, "ctr", "--address", realNodeContainerd, "--namespace", "k8s.io", "tasks", "kill", "--all", "--signal", "SIGKILL", id).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
}
