// Package olm makes, from the OLM bundle's ClusterServiceVersion, the
// objects OLM makes when it installs the operator for an OperatorGroup, for
// tests that cannot run OLM itself: the install strategy's ServiceAccount,
// the bundle's Roles and RoleBindings in the operator's namespace, the
// CSV's permissions as Roles in the operator's namespace and each target
// namespace (as ClusterRoles when the OperatorGroup targets all
// namespaces), its clusterPermissions as ClusterRoles, and its Deployment
// with OLM's olm.targetNamespaces pod annotation.
package olm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/internal/testsupport/repo"
)

// TargetNamespaces is the pod annotation with which OLM tells an operator
// the OperatorGroup's target namespaces.
const TargetNamespaces = "olm.targetNamespaces"

// Install is what OLM makes of the bundle's CSV in one namespace.
type Install struct {
	// ServiceAccount is the name of the operator's ServiceAccount.
	ServiceAccount string
	// RBAC are the ServiceAccount and the roles and bindings, to create
	// in this order; ClusterRoles and ClusterRoleBindings among them are
	// named after the operator's namespace.
	RBAC []client.Object
	// Deployment runs the operator.
	Deployment *appsv1.Deployment
}

// ReadCSV reads the bundle's ClusterServiceVersion (manifests/bundle).
func ReadCSV() (*operatorsv1alpha1.ClusterServiceVersion, error) {
	raw, err := os.ReadFile(repo.Path("manifests", "bundle", "manifests", "memcached-operator.clusterserviceversion.yaml"))
	if err != nil {
		return nil, err
	}
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	if err := yaml.Unmarshal(raw, csv); err != nil {
		return nil, fmt.Errorf("reading the CSV: %w", err)
	}
	return csv, nil
}

// ForOperatorGroup is what OLM makes of csv in namespace for an
// OperatorGroup whose target namespaces are targets; none: all namespaces.
func ForOperatorGroup(csv *operatorsv1alpha1.ClusterServiceVersion, namespace string, targets ...string) (*Install, error) {
	strategy := csv.Spec.InstallStrategy.StrategySpec
	if len(strategy.DeploymentSpecs) != 1 {
		return nil, fmt.Errorf("the CSV has %d deployments, want 1", len(strategy.DeploymentSpecs))
	}
	spec := strategy.DeploymentSpecs[0].Spec.DeepCopy()
	account := spec.Template.Spec.ServiceAccountName
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: namespace}}
	in := &Install{ServiceAccount: account}
	in.RBAC = append(in.RBAC, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: account, Namespace: namespace}})
	objects, err := bundleRBAC(namespace)
	if err != nil {
		return nil, err
	}
	in.RBAC = append(in.RBAC, objects...)
	for i, p := range strategy.Permissions {
		if p.ServiceAccountName != account {
			return nil, fmt.Errorf("permissions for %s, not the Deployment's %s", p.ServiceAccountName, account)
		}
		if len(targets) == 0 {
			// All namespaces: OLM grants the namespaced permissions
			// cluster-wide.
			in.RBAC = append(in.RBAC, clusterRole(fmt.Sprintf("%s-csv-permissions-%d", namespace, i), p.Rules, subjects)...)
			continue
		}
		for _, ns := range append([]string{namespace}, targets...) {
			name := fmt.Sprintf("csv-%d", i)
			in.RBAC = append(in.RBAC,
				&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: p.Rules},
				&rbacv1.RoleBinding{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
					Subjects:   subjects,
				})
		}
	}
	for i, p := range strategy.ClusterPermissions {
		in.RBAC = append(in.RBAC, clusterRole(fmt.Sprintf("%s-csv-%d", namespace, i), p.Rules, subjects)...)
	}
	if spec.Template.Annotations == nil {
		spec.Template.Annotations = map[string]string{}
	}
	spec.Template.Annotations[TargetNamespaces] = strings.Join(targets, ",")
	in.Deployment = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: strategy.DeploymentSpecs[0].Name, Namespace: namespace}, Spec: *spec}
	return in, nil
}

// ClusterScoped are the objects of RBAC without a namespace, which a test
// deletes itself.
func (in *Install) ClusterScoped() []client.Object {
	var out []client.Object
	for _, o := range in.RBAC {
		if o.GetNamespace() == "" {
			out = append(out, o)
		}
	}
	return out
}

// clusterRole is a ClusterRole of rules and its binding to subjects, both
// named name.
func clusterRole(name string, rules []rbacv1.PolicyRule, subjects []rbacv1.Subject) []client.Object {
	return []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   subjects,
		},
	}
}

// bundleRBAC are the bundle's Roles and RoleBindings (besides the CSV), as
// OLM creates them: in the operator's namespace.
func bundleRBAC(namespace string) ([]client.Object, error) {
	dir := repo.Path("manifests", "bundle", "manifests")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []client.Object
	for _, e := range entries {
		var obj client.Object
		switch {
		case strings.HasSuffix(e.Name(), "_v1_role.yaml"):
			obj = &rbacv1.Role{}
		case strings.HasSuffix(e.Name(), "_v1_rolebinding.yaml"):
			obj = &rbacv1.RoleBinding{}
		default:
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if err := yaml.Unmarshal(raw, obj); err != nil {
			return nil, fmt.Errorf("reading %s: %w", e.Name(), err)
		}
		obj.SetNamespace(namespace)
		out = append(out, obj)
	}
	return out, nil
}
