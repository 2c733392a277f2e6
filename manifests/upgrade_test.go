//go:build integration

package manifests_test

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/golden"
	"github.com/example/memcached-operator/internal/testsupport/hostoperator"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/internal/testsupport/testcerts"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/internal/testsupport/tutorial"
	"github.com/example/memcached-operator/pkg/desired"
)

// An upgrade rolls no pod it does not have to: the operator built from an
// earlier commit (UPGRADE_FROM, by default the first whose golden files
// are StatefulSets) serves a Memcached of each golden spec, then this
// build takes over. A Memcached whose golden file is the same at both
// commits keeps its StatefulSet as it was: same generation, same pod
// template, no pod rolled.
func TestUpgradeRollsNoPodWhoseGoldenFileIsUnchanged(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	from := upgradeFrom(t, "UPGRADE_FROM", firstWithSlots)
	names := slices.Sorted(maps.Keys(golden.Specs()))
	serveWithOperatorAt(t, from, "upgrade-", names)

	// This build takes over, and reconciles every Memcached at start.
	before := map[string]*appsv1.StatefulSet{}
	for _, name := range names {
		d := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "upgrade-" + name, Name: golden.Memcached(name).Name}, d)).To(Succeed())
		before[name] = d
	}
	reconciled := reconciles(t)
	cfg, err := cluster.Config()
	g.Expect(err).NotTo(HaveOccurred())
	startOperator(t, cfg, testenv.OperatorOptions{})
	g.Eventually(func() float64 { return reconciles(t) - reconciled }).WithTimeout(timeout).WithPolling(poll).
		Should(BeNumerically(">=", len(names)), "this build reconciles each Memcached")
	time.Sleep(2 * time.Second) // the last reconcile's applies land

	for _, name := range names {
		changed, err := golden.ChangedSince(from, name)
		g.Expect(err).NotTo(HaveOccurred())
		d := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(before[name]), d)).To(Succeed())
		same := d.Generation == before[name].Generation && equality.Semantic.DeepEqual(d.Spec.Template, before[name].Spec.Template)
		t.Logf("%s: golden file changed since %s: %t; StatefulSet generation %d -> %d", name, from, changed, before[name].Generation, d.Generation)
		if !changed {
			g.Expect(same).To(BeTrue(), "the golden file of %s is the same at %s and now, yet the upgrade changed its StatefulSet (generation %d -> %d)",
				name, from, before[name].Generation, d.Generation)
		}
	}
}

// The operator's versions before slots ran each Memcached with a
// Deployment. Built from the last such commit (UPGRADE_FROM_DEPLOYMENTS,
// by default the last whose golden files are Deployments), it serves a
// Memcached of each golden spec; then this build takes over, and each
// moves to its StatefulSet with ready pods never fewer than its size
// (sampled every 50 ms), its Deployment deleted once every slot is ready
// (one Memcached's slots are held unplaceable for a while: its Deployment
// stays meanwhile), and its Service selecting the slots only.
func TestUpgradeFromDeploymentsKeepsEveryPodServing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	from := upgradeFrom(t, "UPGRADE_FROM_DEPLOYMENTS", lastWithDeployments)
	names := slices.Sorted(maps.Keys(golden.Specs()))
	serveWithOperatorAt(t, from, "slots-", names)
	for _, name := range names {
		key := client.ObjectKey{Namespace: "slots-" + name, Name: golden.Memcached(name).Name}
		g.Expect(k8s.Get(ctx, key, &appsv1.Deployment{})).To(Succeed(), "%s at %s runs a Deployment", name, from)
	}

	var mu sync.Mutex
	lowest := map[string]int{}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			for _, name := range names {
				m := golden.Memcached(name)
				list := &corev1.PodList{}
				if err := k8s.List(sampleCtx, list, client.InNamespace("slots-"+name)); err != nil {
					continue
				}
				n := len(tutorial.ReadyPods(list.Items, m.Name))
				mu.Lock()
				if l, ok := lowest[name]; !ok || n < l {
					lowest[name] = n
				}
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	// One Memcached's slots cannot be placed at first (a node label no
	// node has): its Deployment must stay, serving, until they can.
	held := client.ObjectKey{Namespace: "slots-defaults", Name: golden.Memcached("defaults").Name}
	g.Expect(k8s.Patch(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: held.Namespace, Name: held.Name}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"nodeSelector":{"example.com/nowhere":"true"}}}`)))).To(Succeed())
	cfg, err := cluster.Config()
	g.Expect(err).NotTo(HaveOccurred())
	startOperator(t, cfg, testenv.OperatorOptions{})
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, held, &appsv1.StatefulSet{})).To(Succeed())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, held, d)).To(Succeed(), "the Deployment stays while no slot is ready")
		g.Expect(d.DeletionTimestamp).To(BeNil())
		got := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, held, got)).To(Succeed())
		if c := meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionProgressing); c != nil && c.ObservedGeneration == got.Generation {
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonReplacingDeployment))
		}
	}).WithTimeout(5 * time.Second).WithPolling(poll).Should(Succeed())
	g.Expect(k8s.Patch(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: held.Namespace, Name: held.Name}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"nodeSelector":null}}`)))).To(Succeed())
	for _, name := range names {
		m := golden.Memcached(name)
		key := client.ObjectKey{Namespace: "slots-" + name, Name: m.Name}
		g.Eventually(func(g Gomega) {
			got := &cachev1alpha1.Memcached{}
			g.Expect(k8s.Get(ctx, key, got)).To(Succeed())
			g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, cachev1alpha1.ConditionProgressing)).To(BeTrue(), "the replacement is done")
			g.Expect(apierrors.IsNotFound(k8s.Get(ctx, key, &appsv1.Deployment{}))).To(BeTrue(), "the Deployment is deleted")
			set := &appsv1.StatefulSet{}
			g.Expect(k8s.Get(ctx, key, set)).To(Succeed())
			g.Expect(set.Status.ReadyReplicas).To(Equal(*m.Spec.Size))
			svc := &corev1.Service{}
			g.Expect(k8s.Get(ctx, key, svc)).To(Succeed())
			g.Expect(svc.Spec.Selector).To(Equal(desired.SelectorLabels(got)), "the Service selects the slots only")
		}).WithTimeout(3*timeout).WithPolling(poll).Should(Succeed(), name)
	}
	stopSampling()
	<-sampled
	mu.Lock()
	defer mu.Unlock()
	t.Logf("fewest ready pods: %v", lowest)
	for _, name := range names {
		g.Expect(lowest[name]).To(BeNumerically(">=", *golden.Memcached(name).Spec.Size), "%s never had fewer ready pods than its size", name)
	}
}

// serveWithOperatorAt runs the operator built from commit from until it
// serves a Memcached of each golden spec of names, each in the namespace
// prefix+name, then stops it.
func serveWithOperatorAt(t *testing.T, from, prefix string, names []string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	old := buildOperatorAt(t, from)
	install(t, "default") // the CRD as this commit has it; the earlier one's is served the same
	p, err := hostoperator.Start(hostoperator.Options{Binary: old, Kubeconfig: cluster.Kubeconfig})
	g.Expect(err).NotTo(HaveOccurred(), "starting the operator of %s", from)
	t.Cleanup(func() { _ = p.Stop() })
	for _, name := range names {
		ns := prefix + name
		g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		t.Cleanup(func() {
			_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		})
		m := golden.Memcached(name)
		m.Namespace, m.UID = ns, ""
		createWhatItNames(t, m)
		g.Expect(k8s.Create(ctx, m)).To(Succeed())
	}
	for _, name := range names {
		m := golden.Memcached(name)
		key := client.ObjectKey{Namespace: prefix + name, Name: m.Name}
		t.Logf("waiting for %s to be available", key)
		available(t, key, *m.Spec.Size)
	}
	g.Expect(p.Stop()).To(Succeed())
}

// What a commit's golden files hold: the workload kind of each version.
const goldenDefaults = "pkg/desired/testdata/golden/defaults.yaml"

func goldenKindAt(t *testing.T, ref string) string {
	out := git(t, "show", ref+":"+goldenDefaults)
	if strings.Contains(out, "\nkind: StatefulSet\n") {
		return "StatefulSet"
	}
	return "Deployment"
}

// firstWithSlots is the oldest commit whose golden files are
// StatefulSets, and lastWithDeployments the newest whose are Deployments.
func firstWithSlots(t *testing.T, commits []string) string {
	for i := len(commits) - 1; i >= 0; i-- {
		if goldenKindAt(t, commits[i]) == "StatefulSet" {
			return commits[i]
		}
	}
	return ""
}

func lastWithDeployments(t *testing.T, commits []string) string {
	for _, c := range commits {
		if goldenKindAt(t, c) == "Deployment" {
			return c
		}
	}
	return ""
}

// upgradeFrom is the commit an upgrade starts from: $env, or the one pick
// chooses among the commits that changed the golden files, newest first.
func upgradeFrom(t *testing.T, env string, pick func(*testing.T, []string) string) string {
	t.Helper()
	if ref := os.Getenv(env); ref != "" {
		return ref
	}
	commits := strings.Fields(git(t, "log", "--format=%h", "--", goldenDefaults))
	if ref := pick(t, commits); ref != "" {
		return ref
	}
	t.Fatalf("no commit of %s's history fits (a full clone is needed), or set %s", goldenDefaults, env)
	return ""
}

// buildOperatorAt builds the operator of commit ref (from git archive,
// with this machine's module and build caches) and returns its binary.
func buildOperatorAt(t *testing.T, ref string) string {
	t.Helper()
	dir := t.TempDir()
	archive := exec.Command("git", "archive", "--format=tar", ref)
	archive.Dir = repo.Root()
	untar := exec.Command("tar", "-x", "-C", dir)
	var err error
	if untar.Stdin, err = archive.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	archive.Stderr, untar.Stderr = &stderr, &stderr
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v: %s", ref, err, stderr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("unpacking %s: %v: %s", ref, err, stderr.String())
	}
	bin := filepath.Join(dir, "manager")
	// Built as make builds the operator (CGO_ENABLED=0, no -trimpath): of
	// the older version, only its own packages compile; the modules it
	// shares with this one are in the build cache.
	build := exec.Command("go", "build", "-o", bin, "./cmd")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the operator of %s: %v\n%s", ref, err, out)
	}
	return bin
}

func git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = repo.Root()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// createWhatItNames creates what m's spec names and its pods need to be
// admitted: the Secrets, valid for its Service, and its PriorityClass.
func createWhatItNames(t *testing.T, m *cachev1alpha1.Memcached) {
	t.Helper()
	g := NewWithT(t)
	if name := m.Spec.PriorityClassName; name != "" {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 1000}
		g.Expect(k8s.Create(context.Background(), pc)).To(Succeed())
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), pc) })
	}
	if m.Spec.TLS != nil {
		ca, pair, err := testcerts.ForService(m.Namespace, m.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(k8s.Create(context.Background(), ca.Secret(m.Namespace, m.Spec.TLS.SecretName, pair))).To(Succeed())
	}
	if m.Spec.Auth != nil {
		g.Expect(k8s.Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Spec.Auth.SecretName},
			StringData: map[string]string{m.Spec.Auth.Key: "app:a-password\n"},
		})).To(Succeed())
	}
}

// reconciles is the number of reconciles the operators run in this test
// process have finished.
func reconciles(t *testing.T) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "memcached" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
