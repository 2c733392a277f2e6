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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/golden"
	"github.com/example/memcached-operator/internal/testsupport/hostoperator"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/internal/testsupport/testcerts"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

// An upgrade rolls no pod it does not have to: the operator built from an
// earlier commit (UPGRADE_FROM, by default the first with golden files)
// serves a Memcached of each golden spec, then this build takes over. A
// Memcached whose golden file is the same at both commits keeps its
// Deployment as it was: same generation, same pod template, no pod rolled.
func TestUpgradeRollsNoPodWhoseGoldenFileIsUnchanged(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	from := upgradeFrom(t)
	old := buildOperatorAt(t, from)

	cfg, err := cluster.Config()
	g.Expect(err).NotTo(HaveOccurred())
	install(t, "default") // the CRD as this commit has it; the earlier one's is served the same
	p, err := hostoperator.Start(hostoperator.Options{Binary: old, Kubeconfig: cluster.Kubeconfig})
	g.Expect(err).NotTo(HaveOccurred(), "starting the operator of %s", from)
	t.Cleanup(func() { _ = p.Stop() })

	names := slices.Sorted(maps.Keys(golden.Specs()))
	before := map[string]*appsv1.Deployment{}
	for _, name := range names {
		ns := "upgrade-" + name
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
		key := client.ObjectKey{Namespace: "upgrade-" + name, Name: m.Name}
		t.Logf("waiting for %s to be available", key)
		available(t, key, *m.Spec.Size)
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, key, d)).To(Succeed())
		before[name] = d
	}
	g.Expect(p.Stop()).To(Succeed())

	// This build takes over, and reconciles every Memcached at start.
	reconciled := reconciles(t)
	startOperator(t, cfg, testenv.OperatorOptions{})
	g.Eventually(func() float64 { return reconciles(t) - reconciled }).WithTimeout(timeout).WithPolling(poll).
		Should(BeNumerically(">=", len(names)), "this build reconciles each Memcached")
	time.Sleep(2 * time.Second) // the last reconcile's applies land

	for _, name := range names {
		changed, err := golden.ChangedSince(from, name)
		g.Expect(err).NotTo(HaveOccurred())
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(before[name]), d)).To(Succeed())
		same := d.Generation == before[name].Generation && equality.Semantic.DeepEqual(d.Spec.Template, before[name].Spec.Template)
		t.Logf("%s: golden file changed since %s: %t; Deployment generation %d -> %d", name, from, changed, before[name].Generation, d.Generation)
		if !changed {
			g.Expect(same).To(BeTrue(), "the golden file of %s is the same at %s and now, yet the upgrade changed its Deployment (generation %d -> %d)",
				name, from, before[name].Generation, d.Generation)
		}
	}
}

// upgradeFrom is the commit the upgrade starts from: $UPGRADE_FROM, or the
// first commit that has the golden files.
func upgradeFrom(t *testing.T) string {
	t.Helper()
	if ref := os.Getenv("UPGRADE_FROM"); ref != "" {
		return ref
	}
	out := git(t, "log", "--diff-filter=A", "--format=%h", "--", golden.Path("defaults"))
	refs := strings.Fields(out)
	if len(refs) == 0 {
		t.Fatalf("no commit adds %s: the repository's history is needed (a full clone), or set UPGRADE_FROM", golden.Path("defaults"))
	}
	return refs[len(refs)-1]
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
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd")
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
