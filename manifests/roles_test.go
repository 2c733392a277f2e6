//go:build integration

package manifests_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

// The bundle's roles join Kubernetes' aggregated roles: a user granted
// view in a namespace may read Memcacheds there and not change them; one
// granted edit or admin may create, change and scale them.
func TestMemcachedsJoinTheAggregatedRoles(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	install(t, "default")
	ns := testenv.Namespace(t, k8s)
	for _, role := range []string{"view", "edit", "admin"} {
		g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: role + "-user"}},
		})).To(Succeed())
	}
	allowed := func(user, verb, resource, subresource string) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: verb, Group: "cache.example.com", Resource: resource, Subresource: subresource,
			},
		}}
		if err := k8s.Create(ctx, sar); err != nil {
			return false, err
		}
		return sar.Status.Allowed, nil
	}
	tests := []struct {
		user, verb, subresource string
		want                    bool
	}{
		{"view-user", "get", "", true},
		{"view-user", "list", "", true},
		{"view-user", "get", "status", true},
		{"view-user", "create", "", false},
		{"view-user", "patch", "scale", false},
		{"edit-user", "create", "", true},
		{"edit-user", "patch", "", true},
		{"edit-user", "delete", "", true},
		{"edit-user", "patch", "scale", true},
		{"edit-user", "patch", "status", false},
		{"admin-user", "create", "", true},
		{"admin-user", "update", "scale", true},
		{"nobody", "get", "", false},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s %s memcacheds/%s", tt.user, tt.verb, tt.subresource)
		// The controller-manager aggregates the roles shortly after the
		// bundle is applied.
		g.Eventually(func() (bool, error) { return allowed(tt.user, tt.verb, "memcacheds", tt.subresource) }).
			WithTimeout(timeout).WithPolling(poll).Should(Equal(tt.want), name)
	}
}
