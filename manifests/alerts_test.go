//go:build integration

package manifests_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/internal/testsupport/repo"
)

// promtool runs bin/promtool (make test builds it, from the module
// hack/tools/promtool pins) in dir.
func promtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	path := repo.Path("bin", "promtool")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing: make test builds it (make bin/promtool)", path)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ruleGroups is the rule file (promtool's format) of a PrometheusRule.
func ruleGroups(t *testing.T, rule *monitoringv1.PrometheusRule) []byte {
	t.Helper()
	b, err := sigsyaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readRule(t *testing.T) *monitoringv1.PrometheusRule {
	t.Helper()
	raw, err := os.ReadFile(repo.Path("manifests", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rule := &monitoringv1.PrometheusRule{}
	if err := sigsyaml.UnmarshalStrict(raw, rule); err != nil {
		t.Fatal(err)
	}
	return rule
}

// The alerting rules of manifests/prometheus are valid (promtool check
// rules), fire on the synthetic series of rules-test.yaml and only there,
// with the labels and text it expects (promtool test rules); each has a
// runbook in docs/alerts.md.
func TestTheAlertingRules(t *testing.T) {
	g, dir := NewWithT(t), t.TempDir()
	rule := readRule(t)
	g.Expect(os.WriteFile(filepath.Join(dir, "rules.yaml"), ruleGroups(t, rule), 0o644)).To(Succeed())
	tests, err := os.ReadFile(repo.Path("manifests", "prometheus", "rules-test.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "rules-test.yaml"), tests, 0o644)).To(Succeed())
	t.Log(promtool(t, dir, "check", "rules", "rules.yaml"))
	t.Log(promtool(t, dir, "test", "rules", "rules-test.yaml"))

	runbooks, err := os.ReadFile(repo.Path("docs", "alerts.md"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, group := range rule.Spec.Groups {
		for _, r := range group.Rules {
			g.Expect(string(tests)).To(ContainSubstring("alertname: "+r.Alert), "a test of %s", r.Alert)
			g.Expect(string(runbooks)).To(ContainSubstring("\n## "+r.Alert+"\n"), "a runbook of %s", r.Alert)
			g.Expect(r.Annotations).To(HaveKeyWithValue("runbook_url", HaveSuffix("docs/alerts.md#"+strings.ToLower(r.Alert))))
		}
	}
}

// The dashboard's queries are PromQL promtool parses (its variables set),
// and the chart renders the rules and the dashboard as manifests/prometheus
// has them: Helm leaves Prometheus's and Grafana's templates alone.
func TestTheDashboardAndTheChartsCopies(t *testing.T) {
	g, dir := NewWithT(t), t.TempDir()
	raw, err := os.ReadFile(repo.Path("manifests", "prometheus", "dashboard.json"))
	g.Expect(err).NotTo(HaveOccurred())
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	g.Expect(json.Unmarshal(raw, &dashboard)).To(Succeed())
	vars := strings.NewReplacer("$__rate_interval", "5m", "$namespace", "default", "$memcached", ".*")
	var rules []map[string]string
	for i, p := range dashboard.Panels {
		g.Expect(p.Targets).NotTo(BeEmpty(), p.Title)
		for j, target := range p.Targets {
			rules = append(rules, map[string]string{"record": fmt.Sprintf("dashboard:panel%d_%d", i, j), "expr": vars.Replace(target.Expr)})
		}
	}
	file, err := sigsyaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "dashboard.yaml"), file, 0o644)).To(Succeed())
	t.Log(promtool(t, dir, "check", "rules", "dashboard.yaml"))

	rendered := mustHelm(t, "template", release, chartDir, "--namespace", releaseNamespace, "--set", "alerts.enabled=true", "--set", "dashboard.enabled=true",
		"--show-only", "templates/prometheusrule-alerts.yaml", "--show-only", "templates/configmap-grafana-dashboard.yaml")
	docs := strings.Split(rendered, "\n---")
	g.Expect(docs).To(HaveLen(2))
	rule, cm := &monitoringv1.PrometheusRule{}, &corev1.ConfigMap{}
	g.Expect(sigsyaml.Unmarshal([]byte(docs[0]), rule)).To(Succeed())
	g.Expect(sigsyaml.Unmarshal([]byte(docs[1]), cm)).To(Succeed())
	g.Expect(rule.Spec).To(Equal(readRule(t).Spec))
	g.Expect(cm.Data).To(HaveKeyWithValue("memcached.json", string(raw)))
	g.Expect(cm.Labels).To(HaveKeyWithValue("grafana_dashboard", "1"))
	defaults := mustHelm(t, "template", release, chartDir, "--namespace", releaseNamespace)
	g.Expect(defaults).NotTo(ContainSubstring("kind: PrometheusRule"), "the alerts are off by default")
	g.Expect(defaults).NotTo(ContainSubstring("grafana_dashboard"), "the dashboard is off by default")
}
