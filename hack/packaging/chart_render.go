package main

import (
	"fmt"
	"regexp"
	"strings"

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
