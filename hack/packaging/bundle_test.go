package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/api/pkg/validation"
	validationerrors "github.com/operator-framework/api/pkg/validation/errors"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/internal/testsupport/repo"
)

// explained are the validators' findings on the bundle that are accepted:
// the text a finding contains, and why it is accepted. Any other error or
// warning fails the test.
var explained = []struct{ contains, reason string }{{
	contains: "deprecated and removed in v1.25. More info: https://kubernetes.io/docs/reference/using-api/deprecation-guide/#v1-25. Migrate the API(s) for events:",
	reason: "RBAC rules name a group, not a version: the operator writes events.k8s.io/v1 Events (GA since 1.19), " +
		"and the validator flags any rule for the events.k8s.io group because its v1beta1 was removed in 1.25",
}}

func explanation(e validationerrors.Error) (string, bool) {
	for _, x := range explained {
		if strings.Contains(e.Error(), x.contains) {
			return x.reason, true
		}
	}
	return "", false
}

func loadBundle(t *testing.T) *manifests.Bundle {
	t.Helper()
	b, err := manifests.GetBundleFromDir(repo.Path("manifests", "bundle"))
	if err != nil {
		t.Fatalf("loading manifests/bundle: %v", err)
	}
	return b
}

// TestBundleValidates runs the operator framework's own validation of the
// committed bundle: the default bundle validators (CSV, CRDs, bundle) and
// the optional suites OperatorHub, good practices, standard capabilities and
// categories, deprecated APIs, and the objects' own validation.
func TestBundleValidates(t *testing.T) {
	b := loadBundle(t)
	validators := validation.DefaultBundleValidators.WithValidators(
		validation.OperatorHubV2Validator,
		validation.StandardCapabilitiesValidator,
		validation.StandardCategoriesValidator,
		validation.GoodPracticesValidator,
		validation.AlphaDeprecatedAPIsValidator,
		validation.ObjectValidator,
	)
	objs := append(b.ObjectsToValidate(), map[string]string{"k8s-version": "1.37"})
	var findings int
	for _, r := range validators.Validate(objs...) {
		for _, e := range slices.Concat(r.Errors, r.Warnings) {
			findings++
			if reason, ok := explanation(e); ok {
				t.Logf("%s (explained: %s)", describeFinding(r, e), reason)
				continue
			}
			t.Errorf("%s", describeFinding(r, e))
		}
	}
	t.Logf("%d findings", findings)
}

func describeFinding(r validationerrors.ManifestResult, e validationerrors.Error) string {
	return string(e.Level) + " on " + r.Name + ": " + e.Error()
}

// TestBundleHasWhatScorecardChecks asserts what the scorecard's suites
// check of a bundle, since the scorecard itself cannot run here: the
// sample's spec is not empty (basic-check-spec), the CRD has validation
// (olm-crds-have-validation) and the CSV lists the resources a Memcached
// owns (olm-crds-have-resources), and every spec and status field has a
// descriptor (olm-spec-descriptors, olm-status-descriptors).
func TestBundleHasWhatScorecardChecks(t *testing.T) {
	b := loadBundle(t)
	if len(b.V1CRDs) != 1 {
		t.Fatalf("the bundle has %d CRDs, want the Memcached CRD", len(b.V1CRDs))
	}
	crd := b.V1CRDs[0]
	owned := b.CSV.Spec.CustomResourceDefinitions.Owned
	if len(owned) != 1 || owned[0].Name != crd.Name {
		t.Fatalf("the CSV owns %v, want %s", owned, crd.Name)
	}

	specPaths := map[string]bool{}
	for _, d := range owned[0].SpecDescriptors {
		specPaths[d.Path] = true
	}
	expectExamplesDescribed(t, b.CSV.Annotations["alm-examples"], specPaths)

	v := crd.Spec.Versions[0]
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil || len(v.Schema.OpenAPIV3Schema.Properties["spec"].Properties) == 0 {
		t.Fatal("the CRD has no validation schema for its spec")
	}
	if len(owned[0].Resources) == 0 {
		t.Error("the CSV lists no resources a Memcached owns")
	}
	statusPaths := map[string]bool{}
	for _, d := range owned[0].StatusDescriptors {
		statusPaths[d.Path] = true
	}
	for _, p := range fieldPaths(v.Schema.OpenAPIV3Schema.Properties["spec"], "") {
		if !specPaths[p] {
			t.Errorf("spec.%s has no spec descriptor", p)
		}
	}
	for _, p := range fieldPaths(v.Schema.OpenAPIV3Schema.Properties["status"], "") {
		if !statusPaths[p] {
			t.Errorf("status.%s has no status descriptor", p)
		}
	}
	expectDescriptorsShown(t, owned[0].SpecDescriptors)
}

// expectExamplesDescribed: almExamples, the CSV's examples, are there, and
// every field their specs set has a spec descriptor (specPaths).
func expectExamplesDescribed(t *testing.T, almExamples string, specPaths map[string]bool) {
	var examples []map[string]any
	if err := json.Unmarshal([]byte(almExamples), &examples); err != nil {
		t.Fatalf("alm-examples: %v", err)
	}
	if len(examples) == 0 {
		t.Fatal("alm-examples is empty")
	}
	for _, e := range examples {
		spec, _ := e["spec"].(map[string]any)
		if len(spec) == 0 {
			t.Errorf("the example %v has an empty spec", e["metadata"])
		}
		for k := range spec {
			if !specPaths[k] {
				t.Errorf("the example's spec field %s has no spec descriptor", k)
			}
		}
	}
}

// expectDescriptorsShown: every descriptor is named and described; every
// one that is not a field group's parent tells the console how to show
// it.
func expectDescriptorsShown(t *testing.T, descriptors []operatorsv1alpha1.SpecDescriptor) {
	for _, d := range descriptors {
		if d.DisplayName == "" || d.Description == "" {
			t.Errorf("spec descriptor %s lacks a display name or a description", d.Path)
		}
		parent := slices.ContainsFunc(descriptors, func(c operatorsv1alpha1.SpecDescriptor) bool {
			return strings.HasPrefix(c.Path, d.Path+".")
		})
		if !parent && len(d.XDescriptors) == 0 {
			t.Errorf("spec descriptor %s has no x-descriptor", d.Path)
		}
	}
}

// fieldPaths are the paths of the fields of s, and of the fields of its
// object fields that have fields of their own, but for the fields the
// console shows as one (Kubernetes' own types, resources).
func fieldPaths(s apiextensionsv1.JSONSchemaProps, prefix string) []string {
	var out []string
	for n, p := range s.Properties {
		out = append(out, prefix+n)
		if p.Type == "object" && len(p.Properties) > 0 && n != "affinity" && n != "resources" {
			out = append(out, fieldPaths(p, prefix+n+".")...)
		}
	}
	return out
}

// TestBundleInstallsWhatManifestsDefaultDoes compares the CSV's install
// strategy with the install bundle: the same rules for the operator's
// account, the same container, watching OLM's target namespaces.
func TestBundleInstallsWhatManifestsDefaultDoes(t *testing.T) {
	b := loadBundle(t)
	strategy := b.CSV.Spec.InstallStrategy.StrategySpec
	if len(strategy.DeploymentSpecs) != 1 {
		t.Fatalf("%d deployments in the install strategy", len(strategy.DeploymentSpecs))
	}
	c := strategy.DeploymentSpecs[0].Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--watch-namespaces=$(WATCH_NAMESPACES)") {
		t.Errorf("the operator does not watch OLM's target namespaces: args %v", c.Args)
	}
	var watch bool
	for _, e := range c.Env {
		if e.Name == "WATCH_NAMESPACES" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "metadata.annotations['olm.targetNamespaces']" {
			watch = true
		}
	}
	if !watch {
		t.Errorf("WATCH_NAMESPACES is not OLM's olm.targetNamespaces annotation: %v", c.Env)
	}
	for _, m := range b.CSV.Spec.InstallModes {
		if !m.Supported {
			t.Errorf("install mode %s not supported", m.Type)
		}
	}
	if len(b.CSV.Spec.InstallModes) != 4 {
		t.Errorf("install modes %v, want all four", b.CSV.Spec.InstallModes)
	}

	// The rules come from the ClusterRole `make manifests` generates.
	raw, err := os.ReadFile(repo.Path("manifests", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role struct {
		Rules []json.RawMessage `json:"rules"`
	}
	if err := yaml.Unmarshal(raw, &role); err != nil {
		t.Fatal(err)
	}
	for _, want := range role.Rules {
		if !slices.ContainsFunc(strategy.Permissions[0].Rules, func(r rbacv1.PolicyRule) bool {
			got, _ := json.Marshal(r)
			return jsonEqual(t, got, want)
		}) {
			t.Errorf("the install strategy's permissions lack the generated ClusterRole's rule %s", want)
		}
	}
	if b.CSV.Spec.InstallStrategy.StrategyName != operatorsv1alpha1.InstallStrategyNameDeployment {
		t.Errorf("strategy %q", b.CSV.Spec.InstallStrategy.StrategyName)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	ax, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return string(ax) == string(by)
}

// TestBundleAnnotationsMatchTheImageLabels: OLM reads the bundle image's
// labels, operator-sdk and the registry the annotations file; they agree.
func TestBundleAnnotationsMatchTheImageLabels(t *testing.T) {
	dockerfile, err := os.ReadFile(repo.Path("manifests", "bundle", "bundle.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(repo.Path("manifests", "bundle", "metadata", "annotations.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Annotations) == 0 {
		t.Fatal("no annotations")
	}
	for k, v := range f.Annotations {
		if !strings.Contains(string(dockerfile), "LABEL "+k+"="+v+"\n") {
			t.Errorf("bundle.Dockerfile has no label %s=%s", k, v)
		}
	}
}
