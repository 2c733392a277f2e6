package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/lib/version"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/pkg/desired"
)

const (
	packageName = "memcached-operator"
	// channel follows OLM's channel naming: candidate, fast, stable.
	channel = "candidate"
	// targetNamespaces is the annotation OLM puts on the operator's pods:
	// the namespaces of its OperatorGroup, comma-separated, empty for all.
	targetNamespaces = "olm.targetNamespaces"
)

// bundleObjects says what becomes of each object of manifests/default in
// the bundle: the CSV's install strategy (Deployment, service account and
// the rules of its bindings, as namespaced "permissions" that OLM grants
// in the OperatorGroup's target namespaces, or "clusterPermissions"), a
// manifest of the bundle beside the CSV ("namespaced": one OLM creates in
// the operator's namespace, a binding's subject included), or nothing. An
// object missing here stops the generator.
var bundleObjects = map[string]string{
	"ServiceAccount/controller-manager": "strategy",
	"Deployment/controller-manager":     "strategy",
	"ClusterRole/manager":               "permissions",
	"ClusterRoleBinding/manager":        "binding",
	// Rules in the operator's own namespace only (its Lease, its pod):
	// a Role and RoleBinding of the bundle, which OLM creates in that
	// namespace, and not the CSV's permissions, which OLM grants
	// cluster-wide when the OperatorGroup targets all namespaces.
	"Role/leader-election":            "namespaced",
	"RoleBinding/leader-election":     "namespaced",
	"Role/own-image":                  "namespaced",
	"RoleBinding/own-image":           "namespaced",
	"ClusterRole/metrics-auth":        "clusterPermissions",
	"ClusterRoleBinding/metrics-auth": "binding",
	// The takeover from the tutorial's operator is opt-in: OLM installs
	// grant it by hand (docs/install.md).
	"ClusterRole/takeover":                                  "-",
	"ClusterRoleBinding/takeover":                           "-",
	"ClusterRole/memcached-editor":                          "manifest",
	"ClusterRole/memcached-viewer":                          "manifest",
	"ClusterRole/metrics-reader":                            "manifest",
	"Service/controller-manager-metrics":                    "manifest",
	"CustomResourceDefinition/memcacheds.cache.example.com": "manifest",
	// OLM makes the namespace (the OperatorGroup's).
	"Namespace/system": "-",
	// Not among the kinds a registry+v1 bundle may carry.
	"NetworkPolicy/allow-metrics-traffic": "-",
	// Not among them either: docs/install.md tells OLM users to apply
	// manifests/rbac/admission_policy.yaml beside the bundle.
	"ValidatingAdmissionPolicy/writes-only-its-own":        "-",
	"ValidatingAdmissionPolicyBinding/writes-only-its-own": "-",
	// Needs the Prometheus Operator's CRD, which OLM cannot require of
	// every cluster: documented in docs/install.md instead.
	"ServiceMonitor/controller-manager-metrics": "-",
	// The same for the alerting rules, and the dashboard that goes with them.
	"PrometheusRule/alerts":       "-",
	"ConfigMap/grafana-dashboard": "-",
}

// bundle writes the OLM bundle: its files by path.
func bundle(in inputs, v semver.Version, image string) (map[string][]byte, error) {
	files := map[string][]byte{}
	var parts csvParts
	for _, o := range in.install {
		if err := parts.take(o, files); err != nil {
			return nil, err
		}
	}
	if parts.crd == nil || parts.deployment == nil || parts.account == "" {
		return nil, fmt.Errorf("manifests/default lacks the CRD, the manager Deployment or its ServiceAccount")
	}
	if err := checkBindings(in.install, parts.account); err != nil {
		return nil, err
	}
	csv, err := clusterServiceVersion(in, v, image, parts.crd, parts.deployment, parts.account, parts.permissions, parts.cluster)
	if err != nil {
		return nil, err
	}
	b, err := csvFile(csv)
	if err != nil {
		return nil, err
	}
	files["manifests/"+packageName+".clusterserviceversion.yaml"] = b
	files["metadata/annotations.yaml"] = annotationsFile()
	// Of the operator-sdk version make scorecard builds (hack/images.sh checks).
	files["tests/scorecard/config.yaml"] = []byte(strings.ReplaceAll(scorecardConfig, "SCORECARD_TEST_IMAGE", repo.Version("SCORECARD_TEST_IMAGE")))
	files["bundle.Dockerfile"] = dockerfile()
	return files, nil
}

// csvParts are what the CSV is made of, taken from manifests/default.
type csvParts struct {
	crd                  *apiextensionsv1.CustomResourceDefinition
	deployment           *appsv1.Deployment
	account              string
	permissions, cluster []rbacv1.PolicyRule
}

// take adds o, an object of manifests/default, to the CSV's parts, or to
// files as a manifest of the bundle, as bundleObjects says.
func (c *csvParts) take(o *unstructured.Unstructured, files map[string][]byte) error {
	key := o.GetKind() + "/" + strings.TrimPrefix(o.GetName(), namePrefix)
	what, ok := bundleObjects[key]
	if !ok {
		return fmt.Errorf("manifests/default has %s, which the bundle does not know: add it to bundleObjects in hack/packaging/bundle.go", key)
	}
	switch what {
	case "strategy":
		if o.GetKind() == "ServiceAccount" {
			c.account = o.GetName()
			return nil
		}
		c.deployment = &appsv1.Deployment{}
		return runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, c.deployment)
	case "permissions", "clusterPermissions":
		var role rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
			return err
		}
		if what == "permissions" {
			c.permissions = append(c.permissions, role.Rules...)
		} else {
			c.cluster = append(c.cluster, role.Rules...)
		}
	case "manifest", "namespaced":
		return c.takeManifest(o, files)
	}
	return nil
}

// takeManifest adds o to files as a manifest of the bundle, in no
// namespace (OLM's), and keeps the CRD.
func (c *csvParts) takeManifest(o *unstructured.Unstructured, files map[string][]byte) error {
	m := o.DeepCopy()
	m.SetNamespace("")
	if o.GetKind() == "RoleBinding" {
		// A ServiceAccount subject without a namespace is the binding's
		// namespace's: the one OLM installs into.
		subjects, _, _ := unstructured.NestedSlice(m.Object, "subjects")
		for _, sub := range subjects {
			delete(sub.(map[string]any), "namespace")
		}
		_ = unstructured.SetNestedSlice(m.Object, subjects, "subjects")
	}
	if o.GetKind() == "CustomResourceDefinition" {
		c.crd = &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, c.crd); err != nil {
			return err
		}
	}
	b, err := yaml.Marshal(m.Object)
	if err != nil {
		return err
	}
	files["manifests/"+bundleFileName(m)] = b
	return nil
}

// csvFile is csv as the bundle holds it, without the empty fields the
// typed CSV cannot omit.
func csvFile(csv *operatorsv1alpha1.ClusterServiceVersion) ([]byte, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(csv)
	if err != nil {
		return nil, err
	}
	for _, path := range [][]string{
		{"status"},
		{"metadata", "creationTimestamp"},
		{"spec", "apiservicedefinitions"},
		{"spec", "cleanup"},
	} {
		unstructured.RemoveNestedField(u, path...)
	}
	deployments, _, _ := unstructured.NestedSlice(u, "spec", "install", "spec", "deployments")
	for _, d := range deployments {
		unstructured.RemoveNestedField(d.(map[string]any), "spec", "strategy")
		unstructured.RemoveNestedField(d.(map[string]any), "spec", "template", "metadata", "creationTimestamp")
	}
	_ = unstructured.SetNestedSlice(u, deployments, "spec", "install", "spec", "deployments")
	return yaml.Marshal(u)
}

func clusterServiceVersion(in inputs, v semver.Version, image string, crd *apiextensionsv1.CustomResourceDefinition, d *appsv1.Deployment, account string, permissions, cluster []rbacv1.PolicyRule) (*operatorsv1alpha1.ClusterServiceVersion, error) {
	examples := make([]map[string]any, 0, len(in.samples))
	for _, s := range in.samples {
		s := s.DeepCopy()
		s.SetNamespace("")
		examples = append(examples, s.Object)
	}
	almExamples, err := json.MarshalIndent(examples, "", "  ")
	if err != nil {
		return nil, err
	}
	owned, err := ownedCRD(crd)
	if err != nil {
		return nil, err
	}

	// The operator's Deployment, watching the OperatorGroup's namespaces.
	spec := d.Spec.DeepCopy()
	c := &spec.Template.Spec.Containers[0]
	c.Image = image
	c.Env = append(c.Env, corev1.EnvVar{
		Name: "WATCH_NAMESPACES",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			FieldPath: "metadata.annotations['" + targetNamespaces + "']",
		}},
	})
	c.Args = append(c.Args, "--watch-namespaces=$(WATCH_NAMESPACES)")
	memcachedImage := desired.DefaultImage
	for _, e := range c.Env {
		if e.Name == "MEMCACHED_IMAGE" {
			memcachedImage = e.Value
		}
	}

	csv := &operatorsv1alpha1.ClusterServiceVersion{
		TypeMeta: metav1.TypeMeta{APIVersion: operatorsv1alpha1.SchemeGroupVersion.String(), Kind: operatorsv1alpha1.ClusterServiceVersionKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: packageName + ".v" + v.String(),
			Annotations: map[string]string{
				"alm-examples":   string(almExamples),
				"capabilities":   "Seamless Upgrades",
				"categories":     "Database",
				"containerImage": image,
				"description":    "Runs memcached from Memcached objects, with server-side apply and field ownership that never fights another manager.",
				"repository":     "https://github.com/example/memcached-operator",
				"support":        "memcached-operator maintainers",
				"operatorframework.io/suggested-namespace":         installNamespace,
				"features.operators.openshift.io/disconnected":     "true",
				"features.operators.openshift.io/fips-compliant":   "false",
				"features.operators.openshift.io/proxy-aware":      "false",
				"features.operators.openshift.io/tls-profiles":     "false",
				"features.operators.openshift.io/token-auth-aws":   "false",
				"features.operators.openshift.io/token-auth-azure": "false",
				"features.operators.openshift.io/token-auth-gcp":   "false",
				"features.operators.openshift.io/cnf":              "false",
				"features.operators.openshift.io/cni":              "false",
				"features.operators.openshift.io/csi":              "false",
			},
		},
		Spec: operatorsv1alpha1.ClusterServiceVersionSpec{
			DisplayName:    "Memcached Operator",
			Description:    description,
			Version:        version.OperatorVersion{Version: v},
			MinKubeVersion: minKubeVersion,
			Maturity:       "alpha",
			Keywords:       []string{"memcached", "cache", "server-side apply", "gitops"},
			Maintainers:    []operatorsv1alpha1.Maintainer{{Name: "memcached-operator maintainers", Email: "memcached-operator@example.com"}},
			Provider:       operatorsv1alpha1.AppLink{Name: "memcached-operator", URL: "https://github.com/example/memcached-operator"},
			Links: []operatorsv1alpha1.AppLink{
				{Name: "Source", URL: "https://github.com/example/memcached-operator"},
				{Name: "Installation", URL: "https://github.com/example/memcached-operator/blob/main/docs/install.md"},
				{Name: "Memcached", URL: "https://memcached.org"},
			},
			Icon: []operatorsv1alpha1.Icon{{Data: icon, MediaType: "image/svg+xml"}},
			InstallModes: []operatorsv1alpha1.InstallMode{
				{Type: operatorsv1alpha1.InstallModeTypeOwnNamespace, Supported: true},
				{Type: operatorsv1alpha1.InstallModeTypeSingleNamespace, Supported: true},
				{Type: operatorsv1alpha1.InstallModeTypeMultiNamespace, Supported: true},
				{Type: operatorsv1alpha1.InstallModeTypeAllNamespaces, Supported: true},
			},
			InstallStrategy: operatorsv1alpha1.NamedInstallStrategy{
				StrategyName: operatorsv1alpha1.InstallStrategyNameDeployment,
				StrategySpec: operatorsv1alpha1.StrategyDetailsDeployment{
					DeploymentSpecs:    []operatorsv1alpha1.StrategyDeploymentSpec{{Name: d.Name, Label: d.Labels, Spec: *spec}},
					Permissions:        []operatorsv1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: account, Rules: permissions}},
					ClusterPermissions: []operatorsv1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: account, Rules: cluster}},
				},
			},
			CustomResourceDefinitions: operatorsv1alpha1.CustomResourceDefinitions{Owned: []operatorsv1alpha1.CRDDescription{owned}},
			RelatedImages: []operatorsv1alpha1.RelatedImage{
				{Name: "manager", Image: image},
				{Name: "memcached", Image: memcachedImage},
				{Name: "exporter", Image: desired.DefaultExporterImage},
			},
		},
	}
	return csv, nil
}
