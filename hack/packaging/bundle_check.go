package main

import (
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// checkBindings makes sure every binding of manifests/default binds the
// operator's ServiceAccount to a role the install strategy carries: the
// strategy binds each of its rule sets to that account.
func checkBindings(objs []*unstructured.Unstructured, account string) error {
	for _, o := range objs {
		if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		if bundleObjects[o.GetKind()+"/"+strings.TrimPrefix(o.GetName(), namePrefix)] == "-" {
			// Left out of the bundle with its role.
			continue
		}
		var b rbacv1.RoleBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
			return err
		}
		if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != account {
			return fmt.Errorf("%s %s binds %v, not the operator's ServiceAccount alone: the bundle cannot express it", o.GetKind(), o.GetName(), b.Subjects)
		}
		role := b.RoleRef.Kind + "/" + strings.TrimPrefix(b.RoleRef.Name, namePrefix)
		if bundleObjects[o.GetKind()+"/"+strings.TrimPrefix(o.GetName(), namePrefix)] == "namespaced" {
			if bundleObjects[role] != "namespaced" {
				return fmt.Errorf("%s %s binds %s, which is not a Role of the bundle", o.GetKind(), o.GetName(), role)
			}
			continue
		}
		if w := bundleObjects[role]; w != "permissions" && w != "clusterPermissions" {
			return fmt.Errorf("%s %s binds %s, which is not in the install strategy", o.GetKind(), o.GetName(), role)
		}
	}
	return nil
}

// bundleFileName is the name operator-sdk gives a bundle manifest.
func bundleFileName(o *unstructured.Unstructured) string {
	if o.GetKind() == "CustomResourceDefinition" {
		return o.GetName() + ".yaml"
	}
	gv := strings.ReplaceAll(o.GetAPIVersion(), "/", "_")
	return fmt.Sprintf("%s_%s_%s.yaml", o.GetName(), gv, strings.ToLower(o.GetKind()))
}
