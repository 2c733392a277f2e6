package memcached

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
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

// RollOnePod runs the rollout's phase for a Memcached of one slot, name,
// whose StatefulSet the operator rolls with update revision revision and
// template want, and whose pod the store holds as p: its result, and the
// events it recorded.
func RollOnePod(ctx context.Context, c client.Client, name string, p *owned.Pod, revision string, want *appsv1ac.StatefulSetApplyConfiguration) (ctrl.Result, []string, error) {
	recorder := events.NewFakeRecorder(10)
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: name}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
	s := newScope(&Reconciler{Client: c, Recorder: recorder}, m)
	s.obs.StatefulSet = &owned.Summary{OnDelete: true}
	s.obs.StatefulSet.Generation = 1
	s.obs.StatefulSet.Status.ObservedGeneration, s.obs.StatefulSet.Status.UpdateRevision = 1, revision
	s.obs.Pods = []*owned.Pod{p}
	s.desiredSet = want
	result, err := reconcileRollout(ctx, s)
	close(recorder.Events)
	var recorded []string
	for e := range recorder.Events {
		recorded = append(recorded, e)
	}
	return result, recorded, err
}
