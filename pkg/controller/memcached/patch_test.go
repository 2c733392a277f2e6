//go:build integration

package memcached_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/testsupport/testenv"
	"github.com/example/memcached-operator/pkg/controller/memcached"
)

// The operator's JSON patches of pods test what the store held: the
// apiserver's answer to a patch it cannot apply to the pod as it is (a
// test that fails, a path gone) is told from its refusal of the patched
// pod, so that a patch of a pod the store holds an older version of is let
// go for the next reconcile, with no error, no backoff and no ApplyFailed
// in the status.
func TestAFailedPatchTestIsToldFromOtherRefusals(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s)
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "patched", Labels: map[string]string{"revision": "r2"}}}
	g.Expect(k8s.Create(ctx, obj)).To(Succeed())
	patch := func(ops string) error {
		return k8s.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, []byte(ops)))
	}

	err := patch(`[{"op":"test","path":"/metadata/labels/revision","value":"r1"},{"op":"replace","path":"/metadata/labels/revision","value":"r3"}]`)
	g.Expect(err).To(HaveOccurred())
	g.Expect(memcached.FailedTest(err)).To(BeTrue(), "a value the store held no longer there: %v", err)
	err = patch(`[{"op":"test","path":"/metadata/uid","value":"another"}]`)
	g.Expect(memcached.FailedTest(err)).To(BeTrue(), "another object of the name: %v", err)
	err = patch(`[{"op":"test","path":"/metadata/annotations/gone","value":"x"}]`)
	g.Expect(memcached.FailedTest(err)).To(BeTrue(), "a value the store held, removed since: %v", err)
	err = patch(`[{"op":"remove","path":"/metadata/annotations/gone"}]`)
	g.Expect(memcached.FailedTest(err)).To(BeTrue(), "an annotation the store held, removed since: %v", err)

	// The patched object refused: a real error, told.
	err = patch(`[{"op":"replace","path":"/metadata/labels/revision","value":"not a valid label value!"}]`)
	g.Expect(err).To(HaveOccurred())
	g.Expect(memcached.FailedTest(err)).To(BeFalse(), "%v", err)
	g.Expect(memcached.FailedTest(nil)).To(BeFalse())
}
