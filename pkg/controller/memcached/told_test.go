//go:build integration

package memcached_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
)

// toldOfMembership waits until every running pod of m carries the
// version of the membership its ConfigMap holds, where m has one: the
// pods are told a second or two after the ConfigMap changed.
func toldOfMembership(t *testing.T, m *cachev1alpha1.Memcached) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: m.Namespace, Name: desired.MembershipName(m.Name)}, cm)
		if apierrors.IsNotFound(err) {
			return
		}
		g.Expect(err).NotTo(HaveOccurred())
		if !metav1.IsControlledBy(cm, m) {
			return // another's: the pods are told nothing of it
		}
		c, err := discovery.Parse([]byte(cm.Data[desired.MembershipKey]))
		g.Expect(err).NotTo(HaveOccurred())
		pods := &corev1.PodList{}
		g.Expect(k8s.List(context.Background(), pods, client.InNamespace(m.Namespace), client.MatchingLabels(desired.SelectorLabels(m)))).To(Succeed())
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
				continue
			}
			g.Expect(p.Annotations).To(HaveKeyWithValue(desired.AnnotationMembershipVersion, strconv.FormatInt(c.Version, 10)), p.Name)
		}
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
