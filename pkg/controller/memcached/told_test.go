//go:build integration

package memcached_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/internal/testsupport/told"
)

// toldOfMembership waits until every running pod of m was told of its
// membership (told.Membership).
func toldOfMembership(t *testing.T, m *cachev1alpha1.Memcached) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		return told.Membership(context.Background(), k8s, m)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// expectPodsToldAfterTheKubeletCaughtUp: each patch of a pod among rs
// came a second or more after the membership ConfigMap's last apply
// before it, so that the kubelet's own watch of the ConfigMap has it when
// the pod's change makes the kubelet write the pod's volumes.
func expectPodsToldAfterTheKubeletCaughtUp(t *testing.T, rs []testenv.Request) {
	t.Helper()
	var applied time.Time
	for _, r := range rs {
		switch verbAndResource(r) {
		case "apply configmaps":
			applied = r.At
		case "patch pods":
			NewWithT(t).Expect(r.At.Sub(applied)).To(BeNumerically(">=", time.Second), "a pod told %s after its membership changed", r.At.Sub(applied))
		}
	}
}

// verbAndResource is what r did to what, in short: "apply statefulsets",
// "patch pods", "create events", "get secrets", "apply memcacheds/status".
func verbAndResource(r testenv.Request) string {
	verb := map[string]string{http.MethodGet: "get", http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}[r.Method]
	if r.IsApply() {
		verb = "apply"
	}
	parts := strings.Split(r.Path, "/")
	for i, p := range parts {
		if p == "namespaces" && i+2 < len(parts) {
			return verb + " " + strings.Join(append([]string{parts[i+2]}, parts[min(i+4, len(parts)):]...), "/")
		}
	}
	return verb + " " + r.Path
}
