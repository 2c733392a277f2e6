package main

import (
	"fmt"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func placeholder(name string) string { return "__chart_" + name + "__" }

var placeholderLine = regexp.MustCompile(`(?m)^( *)(- |[A-Za-z0-9_./-]+: )__chart_([A-Za-z]+)__$`)

// render marshals obj and replaces each line holding a placeholder with
// its block, indented as the line was; INDENT in a block is that
// indentation's width.
func render(obj *unstructured.Unstructured, blocks map[string]string) (string, error) {
	b, err := yaml.Marshal(obj.Object)
	if err != nil {
		return "", err
	}
	var missing []string
	out := placeholderLine.ReplaceAllStringFunc(string(b), func(line string) string {
		m := placeholderLine.FindStringSubmatch(line)
		indent, name := m[1], m[3]
		block, ok := blocks[name]
		if !ok {
			missing = append(missing, name)
			return line
		}
		block = strings.ReplaceAll(block, "INDENT+2", fmt.Sprint(len(indent)+2))
		block = strings.ReplaceAll(block, "INDENT", fmt.Sprint(len(indent)))
		lines := strings.Split(block, "\n")
		for i := range lines {
			lines[i] = indent + lines[i]
		}
		return strings.Join(lines, "\n")
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("no block for placeholders %v", missing)
	}
	if strings.Contains(out, "__chart_") {
		return "", fmt.Errorf("a placeholder was left in:\n%s", out)
	}
	return out, nil
}

// namespacedRBAC is the manager's ClusterRole and its binding as a Role and
// RoleBinding in each namespace of .Values.watchNamespaces, as the
// namespaced overlay makes them.
func namespacedRBAC(rules []any) (string, error) {
	role := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "Role",
		"metadata":   map[string]any{"name": namePrefix + "manager", "namespace": "NS"},
		"rules":      rules,
	}}
	binding := roleBinding("manager", "Role")
	// The takeover role, a ClusterRole, granted in the watched namespaces
	// only.
	takeover := roleBinding("takeover", "ClusterRole")
	var docs []string
	for _, o := range []*unstructured.Unstructured{role, binding, takeover} {
		o.SetLabels(map[string]string{"app.kubernetes.io/name": "memcached-operator"})
		releaseNames(o)
		o.SetNamespace("{{ $ns }}")
		text, err := render(o, nil)
		if err != nil {
			return "", err
		}
		if o == takeover {
			text = wrap("$.Values.takeover.enabled", text)
		}
		docs = append(docs, "---\n"+text)
	}
	return "{{- range $ns := $.Values.watchNamespaces }}\n" + strings.Join(docs, "") + "{{- end }}\n", nil
}

// roleBinding binds the role name of kind (Role or ClusterRole) to the
// operator's ServiceAccount, in a namespace the caller sets.
func roleBinding(name, kind string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "RoleBinding",
		"metadata":   map[string]any{"name": namePrefix + name, "namespace": "NS"},
		"roleRef":    map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": namePrefix + name},
		"subjects":   []any{map[string]any{"kind": "ServiceAccount", "name": namePrefix + "controller-manager", "namespace": installNamespace}},
	}}
}

func indentLines(s, indent string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = indent + lines[i]
	}
	return strings.Join(lines, "\n")
}

// releaseNames gives the object the release's name prefix and namespace,
// in its name and in the names it refers to, and Helm's labels.
func releaseNames(o *unstructured.Unstructured) {
	rename := func(s string) string {
		if rest, ok := strings.CutPrefix(s, namePrefix); ok {
			return "{{ $.Release.Name }}-" + rest
		}
		return s
	}
	o.SetName(rename(o.GetName()))
	if o.GetNamespace() != "" {
		o.SetNamespace("{{ $.Release.Namespace }}")
	}
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels["helm.sh/chart"] = `{{ include "memcached-operator.chart" $ }}`
	labels["app.kubernetes.io/instance"] = "{{ $.Release.Name }}"
	labels["app.kubernetes.io/managed-by"] = "{{ $.Release.Service }}"
	o.SetLabels(labels)
	if name, ok, _ := unstructured.NestedString(o.Object, "roleRef", "name"); ok {
		_ = unstructured.SetNestedField(o.Object, rename(name), "roleRef", "name")
	}
	if subjects, ok, _ := unstructured.NestedSlice(o.Object, "subjects"); ok {
		for _, s := range subjects {
			m := s.(map[string]any)
			if name, ok := m["name"].(string); ok {
				m["name"] = rename(name)
			}
			if _, ok := m["namespace"]; ok {
				m["namespace"] = "{{ $.Release.Namespace }}"
			}
		}
		_ = unstructured.SetNestedSlice(o.Object, subjects, "subjects")
	}
	if sa, ok, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName"); ok {
		_ = unstructured.SetNestedField(o.Object, rename(sa), "spec", "template", "spec", "serviceAccountName")
	}
}

// templateDeployment turns the manager Deployment into the chart's: the
// values where the chart has them, blocks (by placeholder) where a value
// is YAML or a field is optional.
func templateDeployment(o *unstructured.Unstructured, d *appsv1.Deployment) (map[string]string, error) {
	if len(d.Spec.Template.Spec.Containers) != 1 {
		return nil, fmt.Errorf("the manager Deployment has %d containers, the chart knows one", len(d.Spec.Template.Spec.Containers))
	}
	var lines []string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		l, ok := args[a]
		if !ok {
			return nil, fmt.Errorf("the manager's argument %q is not in the chart's table (hack/packaging/chart.go)", a)
		}
		lines = append(lines, l...)
	}
	lines = append(lines, extraArgs...)
	blocks := map[string]string{
		"args":           strings.Join(lines, "\n"),
		"replicas":       "replicas: {{ $.Values.replicaCount }}",
		"resources":      "resources:\n  {{- toYaml $.Values.resources | nindent INDENT+2 }}",
		"podAnnotations": "{{- with $.Values.podAnnotations }}\n{{- toYaml . | nindent INDENT }}\n{{- end }}",
	}
	var sched []string
	for _, f := range []string{"imagePullSecrets", "nodeSelector", "tolerations", "affinity"} {
		sched = append(sched,
			"{{- with $.Values."+f+" }}",
			f+":",
			"  {{- toYaml . | nindent INDENT+2 }}",
			"{{- end }}")
	}
	sched = append(sched,
		"{{- with $.Values.priorityClassName }}",
		"priorityClassName: {{ . }}",
		"{{- end }}")
	blocks["scheduling"] = strings.Join(sched, "\n")

	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	c["args"] = []any{placeholder("args")}
	c["image"] = `{{ include "memcached-operator.image" $ }}`
	c["imagePullPolicy"] = "{{ $.Values.image.pullPolicy }}"
	c["resources"] = placeholder("resources")
	env, _ := c["env"].([]any)
	for _, e := range env {
		if e := e.(map[string]any); e["name"] == "MEMCACHED_IMAGE" {
			e["value"] = "{{ $.Values.memcachedImage }}"
		}
	}
	if err := unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedField(o.Object, placeholder("replicas"), "spec", "replicas"); err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedField(o.Object, placeholder("scheduling"), "spec", "template", "spec", "nodeSelector"); err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedField(o.Object, placeholder("podAnnotations"), "spec", "template", "metadata", "annotations", "zz-chart"); err != nil {
		return nil, err
	}
	return blocks, nil
}
