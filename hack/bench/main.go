// Command bench measures what the operator costs the apiserver, on a fresh
// local cluster: requests and writes per Memcached, conflicts, time to
// converge, and the operator's CPU and memory, from the apiserver's audit
// log of the operator's own user (not from the operator's bookkeeping).
//
//	go run ./hack/bench -n 100,1000 [-unrelated 0] [-profile] [-timeout 0] [-out docs/benchmarks.md]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/golimit"
)

const (
	operatorNamespace = "memcached-bench"
	operatorSA        = "memcached-operator"
	operatorUser      = "system:serviceaccount:" + operatorNamespace + ":" + operatorSA
	benchImage        = desired.DefaultImage
	workers           = 32
)

var (
	root       = repoRoot()
	kubectl    = filepath.Join(root, "bin", "k8s", "kubectl")
	scheme     = newScheme()
	steadyFl   = flag.Duration("steady", 30*time.Second, "length of the steady-state window")
	syncFl     = flag.Duration("sync-period", 10*time.Second, "the operator's --sync-period (resyncs happen during the steady window)")
	opArgsFl   = flag.String("operator-args", "", "extra flags for the operator, space-separated (e.g. --kube-api-qps=200)")
	noBaseFl   = flag.Bool("skip-baseline", false, "skip the no-operator baseline")
	onlyFl     = flag.Bool("create-only", false, "stop after the create phase (for large N: memory and create cost)")
	memLimitFl = flag.Bool("container-memory-limit", true, fmt.Sprintf("run the operator with the Go memory limit its container gets: GOMEMLIMIT at %.0f%% of the manager's memory limit in manifests/manager", golimit.Ratio*100))
	timeoutFl  = flag.Duration("timeout", 0, "how long a phase may take to converge (default: 300 ms per Memcached, at least 10 minutes)")
)

func newScheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = cachev1alpha1.AddToScheme(s)
	return s
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func main() {
	sizes := flag.String("n", "100,1000", "comma-separated numbers of Memcacheds")
	unrelated := flag.Int("unrelated", 0, "unrelated Deployments created before the operator starts (to show the cache holds only its own)")
	profile := flag.Bool("profile", false, "write CPU and heap profiles of the operator to bin/bench/")
	out := flag.String("out", "", "also write the report to this markdown file")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard()) // the bench's client logs nothing worth reading

	var report strings.Builder
	fmt.Fprintf(&report, "Machine: %d cores, %s; command: `go run ./hack/bench %s`; date %s.\n\n",
		runtime.NumCPU(), memTotal(), strings.Join(os.Args[1:], " "), time.Now().UTC().Format("2006-01-02"))
	// The Go memory limit the operator gets in its container; 0: none.
	var goMemLimit int64
	if *memLimitFl {
		limit, err := containerMemoryLimit()
		if err != nil {
			fail(err)
		}
		goMemLimit = golimit.Of(limit)
		fmt.Fprintf(&report, "The operator runs with GOMEMLIMIT=%d MiB, as in its container (%.0f%% of the manager's %d MiB limit).\n\n",
			goMemLimit>>20, golimit.Ratio*100, limit>>20)
	} else {
		fmt.Fprintf(&report, "The operator runs without a Go memory limit.\n\n")
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fail(fmt.Errorf("bad -n value %q", s))
		}
		r, err := runOnce(n, *unrelated, *profile, goMemLimit)
		report.WriteString(r)
		if err != nil {
			// What was measured before the failure is still worth reading.
			fmt.Print(report.String())
			fail(err)
		}
	}
	fmt.Print(report.String())
	if *out != "" {
		if err := writeReport(*out, report.String()); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

func memTotal() string {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "MemTotal:") {
			kb, _ := strconv.Atoi(strings.Fields(l)[1])
			return fmt.Sprintf("%d GiB", kb/1024/1024)
		}
	}
	return "unknown memory"
}

// writeReport replaces the generated part of the markdown file.
func writeReport(path, report string) error {
	const marker = "<!-- generated by hack/bench: everything below is replaced -->\n"
	old, _ := os.ReadFile(path)
	head := string(old)
	if i := strings.Index(head, marker); i >= 0 {
		head = head[:i]
	}
	return os.WriteFile(path, []byte(head+marker+"\n"+report), 0o644)
}

// cluster runs hack/cluster.sh with the bench's cluster settings.
func cluster(env []string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(root, "hack", "cluster.sh"), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return "", fmt.Errorf("hack/cluster.sh %v: %w: %s", args, err, ee.Stderr)
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

type phase struct {
	name     string
	wall     time.Duration
	requests map[string]int // "verb resource" -> count
	writes   int            // create/update/patch/delete of Deployments, Services, PodDisruptionBudgets and Memcacheds
	events   int            // event writes
	conflict int
	cpu      float64
	rss      int64              // peak resident set, KiB
	stack    map[string]float64 // CPU seconds of each process of the local cluster
}

func runOnce(n, unrelated int, profile bool, goMemLimit int64) (string, error) {
	name := fmt.Sprintf("bench-%d", n)
	state, err := os.MkdirTemp("", "memcached-bench-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(state)
	env := []string{"CLUSTER_NAME=" + name, "STATE_DIR=" + state, "AUDIT_USER=" + operatorUser, "NODES=4"}
	fmt.Fprintf(os.Stderr, "== N=%d: creating cluster %s\n", n, name)
	if _, err := cluster(env, "up"); err != nil {
		return "", err
	}
	defer func() { _, _ = cluster(env, "down") }()
	kubeconfig, _ := cluster(env, "kubeconfig")
	auditLog, _ := cluster(env, "audit-log")
	procs, err := clusterProcesses(state, name)
	if err != nil {
		return "", err
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", err
	}
	cfg.QPS, cfg.Burst = -1, -1
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return "", err
	}
	ctx := context.Background()

	// Baseline: the same Deployments and Services created directly, no operator.
	var baseline time.Duration
	var baselineCPU map[string]float64
	if !*noBaseFl {
		fmt.Fprintf(os.Stderr, "== N=%d: baseline, %d Deployments and Services without the operator\n", n, n)
		if baseline, baselineCPU, err = runBaseline(ctx, cfg, c, n, procs); err != nil {
			return "", err
		}
	}

	if out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "apply", "--server-side", "-f", filepath.Join(root, "manifests", "crd", "bases")).CombinedOutput(); err != nil {
		return "", fmt.Errorf("installing the CRD: %w: %s", err, out)
	}
	if err := setUpOperatorUser(ctx, c); err != nil {
		return "", err
	}
	if unrelated > 0 {
		fmt.Fprintf(os.Stderr, "== N=%d: %d unrelated Deployments\n", n, unrelated)
		if err := createUnrelated(ctx, c, unrelated); err != nil {
			return "", err
		}
	}
	saKubeconfig := filepath.Join(state, "operator.kubeconfig")
	sa, err := cluster(env, "sa-kubeconfig", operatorNamespace, operatorSA)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(saKubeconfig, []byte(sa), 0o600); err != nil {
		return "", err
	}

	op, err := startOperator(saKubeconfig, profile, goMemLimit)
	if err != nil {
		return "", err
	}
	defer op.stop()

	ns := "bench"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return "", err
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	watch, err := watchNamespace(watchCtx, cfg, ns)
	if err != nil {
		return "", err
	}
	// The Memcached informer starts on the first list: before the clock does.
	if err := watch.List(ctx, &cachev1alpha1.MemcachedList{}, client.InNamespace(ns)); err != nil {
		return "", err
	}
	progress := func(done int) {
		fmt.Fprintf(os.Stderr, "   %d of %d converged, operator RSS %d MiB (peak %d MiB), CPU %.0f s\n",
			done, n, op.rss()/1024, op.peakRSS()/1024, op.cpuSeconds())
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("cache-%05d", i)
	}

	var phases []phase
	measure := func(name string, act func() error) error {
		fmt.Fprintf(os.Stderr, "== N=%d: %s\n", n, name)
		off := fileSize(auditLog)
		cpu0, stack0 := op.cpuSeconds(), procs.cpu()
		start := time.Now()
		actErr := act()
		p := phase{name: name, wall: time.Since(start), cpu: op.cpuSeconds() - cpu0, rss: op.peakRSS(), stack: since(procs.cpu(), stack0)}
		if actErr != nil {
			// What it cost until it stopped is still worth reading.
			p.name += " (stopped early)"
		}
		time.Sleep(500 * time.Millisecond) // let the last audit lines land
		if err := countAudit(auditLog, off, &p); err != nil {
			return err
		}
		phases = append(phases, p)
		if actErr != nil {
			return fmt.Errorf("%s: %w (operator peak RSS so far %d MiB, CPU %.1f s)", name, actErr, p.rss/1024, p.cpu)
		}
		fmt.Fprintf(os.Stderr, "   %s: %s, %d writes, %d events, %d 409s, CPU %.1f s, peak RSS %d MiB\n",
			name, p.wall.Round(time.Millisecond), p.writes, p.events, p.conflict, p.cpu, p.rss/1024)
		return nil
	}

	stopProfile := func() {}
	if profile {
		stopProfile = op.cpuProfile(filepath.Join(root, "bin", "bench", fmt.Sprintf("cpu-%d.pprof", n)))
	}
	if err := measure("create", func() error {
		if err := parallel(names, func(name string) error {
			return c.Create(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}})
		}); err != nil {
			return err
		}
		return waitConverged(ctx, watch, ns, n, 1, progress)
	}); err != nil {
		if profile {
			op.heapProfile(filepath.Join(root, "bin", "bench", fmt.Sprintf("heap-%d.pprof", n)))
		}
		return render(n, unrelated, baseline, baselineCPU, phases), err
	}
	stopProfile()
	if *onlyFl {
		if profile {
			op.heapProfile(filepath.Join(root, "bin", "bench", fmt.Sprintf("heap-%d.pprof", n)))
		}
		return render(n, unrelated, baseline, baselineCPU, phases), nil
	}
	if err := measure(fmt.Sprintf("steady (%s)", *steadyFl), func() error {
		time.Sleep(*steadyFl)
		return nil
	}); err != nil {
		return render(n, unrelated, baseline, baselineCPU, phases), err
	}
	if err := measure("scale to 2", func() error {
		if err := parallel(names, func(name string) error {
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			return c.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":2}}`)))
		}); err != nil {
			return err
		}
		return waitConverged(ctx, watch, ns, n, 2, progress)
	}); err != nil {
		return render(n, unrelated, baseline, baselineCPU, phases), err
	}
	if profile {
		op.heapProfile(filepath.Join(root, "bin", "bench", fmt.Sprintf("heap-%d.pprof", n)))
	}
	if err := measure("delete", func() error {
		// One by one, as the creates: a single delete-collection of
		// thousands outlasts the apiserver's request timeout on this machine.
		if err := parallel(names, func(name string) error {
			return client.IgnoreNotFound(c.Delete(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
		}); err != nil {
			return err
		}
		return waitGone(ctx, watch, ns)
	}); err != nil {
		return render(n, unrelated, baseline, baselineCPU, phases), err
	}
	return render(n, unrelated, baseline, baselineCPU, phases), nil
}

func parallel(names []string, f func(string) error) error {
	ch := make(chan string)
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for name := range ch {
				if err := f(name); err != nil {
					errs <- err
				}
			}
		})
	}
	for _, n := range names {
		ch <- n
	}
	close(ch)
	wg.Wait()
	close(errs)
	return <-errs
}

// runBaseline creates n Deployments and Services directly and waits until
// they are Available; it returns how long that took and what CPU each of
// the cluster's processes spent meanwhile.
func runBaseline(ctx context.Context, cfg *rest.Config, c client.Client, n int, procs processes) (time.Duration, map[string]float64, error) {
	ns := "baseline"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return 0, nil, err
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	watch, err := watchNamespace(watchCtx, cfg, ns)
	if err != nil {
		return 0, nil, err
	}
	// The Deployment informer starts on the first list: before the clock does.
	if err := watch.List(ctx, &appsv1.DeploymentList{}, client.InNamespace(ns)); err != nil {
		return 0, nil, err
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("cache-%05d", i)
	}
	start, cpu0 := time.Now(), procs.cpu()
	err = parallel(names, func(name string) error {
		// The Deployment and Service the operator would build, created
		// directly (a Memcached of size 1 has no PodDisruptionBudget).
		m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
		dep := desired.Deployment(m, benchImage)
		dep.OwnerReferences = nil // there is no Memcached to own it
		if err := c.Apply(ctx, dep, client.FieldOwner("bench-baseline")); err != nil {
			return err
		}
		svc := desired.Service(m)
		svc.OwnerReferences = nil
		return c.Apply(ctx, svc, client.FieldOwner("bench-baseline"))
	})
	if err != nil {
		return 0, nil, err
	}
	for {
		list := &appsv1.DeploymentList{}
		if err := watch.List(ctx, list, client.InNamespace(ns)); err != nil {
			return 0, nil, err
		}
		ready := 0
		for _, d := range list.Items {
			if d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == 1 && d.Status.UpdatedReplicas == 1 {
				ready++
			}
		}
		if ready == n {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	took, cpu := time.Since(start), since(procs.cpu(), cpu0)
	// Gone before the operator's phases start: deleting a thousand
	// Deployments, their pods and Services is work for the same two cores.
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return 0, nil, err
	}
	for {
		err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return took, cpu, nil
		}
		if err != nil {
			return 0, nil, err
		}
		time.Sleep(time.Second)
	}
}

func createUnrelated(ctx context.Context, c client.Client, n int) error {
	ns := "unrelated"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("app-%05d", i)
	}
	return parallel(names, func(name string) error {
		labels := map[string]string{"app": name}
		return c.Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](0),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}},
				},
			},
		})
	})
}

func setUpOperatorUser(ctx context.Context, c client.Client) error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: operatorSA}},
	}
	// The operator's generated ClusterRole, bound to its ServiceAccount.
	role := &rbacv1.ClusterRole{}
	if err := readYAML(filepath.Join(root, "manifests", "rbac", "role.yaml"), role); err != nil {
		return err
	}
	role.Name = "memcached-bench-operator"
	objs = append(objs, role, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "memcached-bench-operator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: operatorNamespace, Name: operatorSA}},
	})
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

func readYAML(path string, into any) error {
	out, err := exec.Command(kubectl, "create", "--dry-run=client", "-o", "json", "-f", path).Output()
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return json.Unmarshal(out, into)
}

// waitConverged waits until every Memcached of ns reports size ready
// replicas for its current generation, reading them from r.
func waitConverged(ctx context.Context, r client.Reader, ns string, n int, size int32, progress func(done int)) error {
	// 2 cores: allow 300 ms per Memcached, at least 10 minutes.
	limit := max(10*time.Minute, time.Duration(n)*300*time.Millisecond)
	if *timeoutFl > 0 {
		limit = *timeoutFl
	}
	deadline := time.Now().Add(limit)
	lastReport := time.Now()
	done := 0
	for time.Now().Before(deadline) {
		list := &cachev1alpha1.MemcachedList{}
		if err := r.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		done = 0
		for _, m := range list.Items {
			if m.Status.ObservedGeneration == m.Generation && m.Status.ReadyReplicas == size &&
				meta.IsStatusConditionTrue(m.Status.Conditions, cachev1alpha1.ConditionAvailable) &&
				meta.IsStatusConditionFalse(m.Status.Conditions, cachev1alpha1.ConditionReconciling) {
				done++
			}
		}
		if done == n {
			return nil
		}
		if time.Since(lastReport) >= time.Minute {
			progress(done)
			lastReport = time.Now()
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("%d of %d Memcacheds converged after %s", done, n, limit)
}

// waitGone waits until the Memcacheds of ns and everything they owned are
// gone, reading them from r.
func waitGone(ctx context.Context, r client.Reader, ns string) error {
	for {
		left := 0
		for _, l := range []client.ObjectList{&cachev1alpha1.MemcachedList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{}, &policyv1.PodDisruptionBudgetList{}} {
			if err := r.List(ctx, l, client.InNamespace(ns)); err != nil {
				return err
			}
			left += meta.LenList(l)
		}
		if left == 0 {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// watchNamespace returns a reader of the objects of ns served from watches.
// The bench waits on what it sees there: that costs the apiserver one list
// and one watch per kind, where polling would list every object four times
// a second, load on the same two cores as what is measured. The watches end
// with ctx.
func watchNamespace(ctx context.Context, cfg *rest.Config, ns string) (client.Reader, error) {
	ca, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, err
	}
	go func() {
		if err := ca.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "bench: watching", ns+":", err)
		}
	}()
	if !ca.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("watching %s: the cache did not start", ns)
	}
	return ca, nil
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// auditEvent is the part of an audit.k8s.io/v1 Event the bench reads.
type auditEvent struct {
	Stage     string                    `json:"stage"`
	Verb      string                    `json:"verb"`
	User      struct{ Username string } `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

func countAudit(path string, from int64, p *phase) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening the audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return err
	}
	p.requests = map[string]int{}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<24)
	for s.Scan() {
		var e auditEvent
		if json.Unmarshal(s.Bytes(), &e) != nil || e.User.Username != operatorUser || e.Stage != "ResponseComplete" {
			continue
		}
		res := "-"
		if e.ObjectRef != nil {
			res = e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				res += "/" + e.ObjectRef.Subresource
			}
		}
		p.requests[e.Verb+" "+res]++
		switch e.Verb {
		case "create", "update", "patch", "delete":
			if strings.HasPrefix(res, "events") {
				p.events++
			} else {
				p.writes++
			}
		}
		if e.ResponseStatus != nil && e.ResponseStatus.Code == http.StatusConflict {
			p.conflict++
		}
	}
	return s.Err()
}

type operatorProcess struct {
	cmd   *exec.Cmd
	pprof string
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startOperator runs bin/manager as the user of kubeconfig, with the Go
// memory limit goMemLimit (none when 0), and waits until it is ready.
func startOperator(kubeconfig string, profile bool, goMemLimit int64) (*operatorProcess, error) {
	bin := filepath.Join(root, "bin", "manager")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s: %w (run 'make build')", bin, err)
	}
	probes := freeAddr()
	op := &operatorProcess{}
	args := []string{"--kubeconfig", kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address", probes,
		"--sync-period", syncFl.String(), "--memcached-image", benchImage, "--zap-log-level=error"}
	args = append(args, strings.Fields(*opArgsFl)...)
	if profile {
		op.pprof = freeAddr()
		args = append(args, "--pprof-bind-address", op.pprof)
		if err := os.MkdirAll(filepath.Join(root, "bin", "bench"), 0o755); err != nil {
			return nil, err
		}
	}
	op.cmd = exec.Command(bin, args...)
	op.cmd.Stderr = os.Stderr
	if goMemLimit > 0 {
		// What the operator sets in its container from the cgroup's limit;
		// the bench's host process has no cgroup limit of its own.
		op.cmd.Env = append(os.Environ(), fmt.Sprintf("GOMEMLIMIT=%d", goMemLimit))
	}
	if err := op.cmd.Start(); err != nil {
		return nil, err
	}
	for range 120 {
		if resp, err := http.Get("http://" + probes + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return op, nil
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	op.stop()
	return nil, fmt.Errorf("the operator did not become ready")
}

// containerMemoryLimit is the memory limit of the manager container in
// manifests/manager/manager.yaml, in bytes.
func containerMemoryLimit() (int64, error) {
	path := filepath.Join(root, "manifests", "manager", "manager.yaml")
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	dec := k8syaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); err != nil {
			if err == io.EOF {
				return 0, fmt.Errorf("%s: no manager container with a memory limit", path)
			}
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && c.Name == "manager" {
				return q.Value(), nil
			}
		}
	}
}

func (o *operatorProcess) stop() {
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	_ = o.cmd.Wait()
}

// cpuSeconds is the operator's user and system CPU time so far.
func (o *operatorProcess) cpuSeconds() float64 { return cpuSeconds(o.cmd.Process.Pid) }

// processes are the processes of the local cluster, by name (etcd,
// kube-apiserver, ...), as kwokctl records their PIDs.
type processes map[string]int

func clusterProcesses(state, name string) (processes, error) {
	files, err := filepath.Glob(filepath.Join(state, "kwok", "clusters", name, "pids", "*.pid"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no PID files of cluster %s in %s: %v", name, state, err)
	}
	ps := processes{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		ps[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
	}
	return ps, nil
}

// cpu is each process's user and system CPU time so far.
func (ps processes) cpu() map[string]float64 {
	out := map[string]float64{}
	for name, pid := range ps {
		out[name] = cpuSeconds(pid)
	}
	return out
}

// since is the CPU time spent by each process between two readings.
func since(now, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for name, v := range now {
		out[name] = v - before[name]
	}
	return out
}

// cpuSeconds is a process's user and system CPU time so far.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	stat := string(b)
	f := strings.Fields(stat[strings.LastIndexByte(stat, ')')+2:])
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// rss is the operator's resident set size now, in KiB (VmRSS).
func (o *operatorProcess) rss() int64 { return o.status("VmRSS:") }

// peakRSS is the operator's peak resident set size in KiB (VmHWM).
func (o *operatorProcess) peakRSS() int64 { return o.status("VmHWM:") }

// status reads a size in KiB from the operator's /proc status.
func (o *operatorProcess) status(field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", o.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field) {
			kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return kb
		}
	}
	return 0
}

// cpuProfile starts a 120 s CPU profile; the returned func waits for it.
func (o *operatorProcess) cpuProfile(path string) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fetch("http://"+o.pprof+"/debug/pprof/profile?seconds=120", path)
	}()
	return func() { <-done }
}

// heapProfile writes a heap profile taken right after a collection, so that
// in-use figures are the live heap.
func (o *operatorProcess) heapProfile(path string) {
	fetch("http://"+o.pprof+"/debug/pprof/heap?gc=1", path)
}

func fetch(url, path string) {
	resp, err := http.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
	fmt.Fprintln(os.Stderr, "wrote", path)
}

func render(n, unrelated int, baseline time.Duration, baselineCPU map[string]float64, phases []phase) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### N = %d", n)
	if unrelated > 0 {
		fmt.Fprintf(&b, " (with %d unrelated Deployments)", unrelated)
	}
	if *opArgsFl != "" {
		fmt.Fprintf(&b, ", operator flags `%s`", *opArgsFl)
	}
	if baseline > 0 {
		fmt.Fprintf(&b, "\n\nBaseline, no operator, %d Deployments and their Services created directly until Available: %s.\n\n", n, baseline.Round(time.Millisecond))
	} else {
		b.WriteString("\n\nNo baseline run.\n\n")
	}
	b.WriteString("| phase | wall time | vs baseline | operator requests | writes | writes per CR | event writes | 409s | CPU s | peak RSS MiB |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range phases {
		total := 0
		for _, v := range p.requests {
			total += v
		}
		ratio := "-"
		if baseline > 0 && (p.name == "create" || strings.HasPrefix(p.name, "scale")) {
			ratio = fmt.Sprintf("%.2fx", p.wall.Seconds()/baseline.Seconds())
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %.2f | %d | %d | %.1f | %.0f |\n",
			p.name, p.wall.Round(time.Millisecond), ratio, total, p.writes, float64(p.writes)/float64(n), p.events, p.conflict, p.cpu, float64(p.rss)/1024)
	}
	b.WriteString("\nOperator requests by verb and resource (audit log):\n\n| phase | requests |\n|---|---|\n")
	for _, p := range phases {
		keys := make([]string, 0, len(p.requests))
		for k := range p.requests {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s: %d", k, p.requests[k]))
		}
		if len(parts) == 0 {
			parts = []string{"none"}
		}
		fmt.Fprintf(&b, "| %s | %s |\n", p.name, strings.Join(parts, ", "))
	}
	renderStackCPU(&b, baselineCPU, phases)
	b.WriteString("\n")
	return b.String()
}

// renderStackCPU tells the CPU seconds each process of the cluster spent in
// each phase, next to the operator's: on a machine whose cores they share,
// where the time of a phase went.
func renderStackCPU(b *strings.Builder, baselineCPU map[string]float64, phases []phase) {
	var names []string
	for _, p := range phases {
		for name := range p.stack {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	b.WriteString("\nCPU seconds by process (`/proc/PID/stat`):\n\n| phase | " + strings.Join(names, " | ") + " | operator | all |\n|---|")
	b.WriteString(strings.Repeat("---|", len(names)+2) + "\n")
	row := func(name string, stack map[string]float64, operator float64, withOperator bool) {
		fmt.Fprintf(b, "| %s |", name)
		all := operator
		for _, n := range names {
			fmt.Fprintf(b, " %.1f |", stack[n])
			all += stack[n]
		}
		op := "-"
		if withOperator {
			op = fmt.Sprintf("%.1f", operator)
		}
		fmt.Fprintf(b, " %s | %.1f |\n", op, all)
	}
	if baselineCPU != nil {
		row("baseline", baselineCPU, 0, false)
	}
	for _, p := range phases {
		row(p.name, p.stack, p.cpu, true)
	}
}
