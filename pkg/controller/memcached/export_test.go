package memcached

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/owned"
)

// For the tests in package memcached_test.
var EnqueueFreedName = enqueueFreedName

var FailedTest = failedTest

// PatchPodAndLookAgain sends ops as the rollout patches p, and says
// whether the apiserver applied them and what the rollout's phase then
// returns in place of result.
func PatchPodAndLookAgain(ctx context.Context, c client.Client, p *owned.Pod, ops []map[string]any, result ctrl.Result) (bool, ctrl.Result, error) {
	s := newScope(&Reconciler{Client: c}, &cachev1alpha1.Memcached{})
	sent, err := s.patchPod(ctx, p, ops)
	return sent, s.requeueIfPatchLetGo(result), err
}
