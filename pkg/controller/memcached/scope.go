package memcached

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	cacheac "github.com/example/memcached-operator/applyconfig/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/owned"
	"github.com/example/memcached-operator/pkg/status"
)

// errMemcachedGone: the Memcached was deleted after the cache last saw it,
// or its namespace is being deleted.
var errMemcachedGone = errors.New("the Memcached is gone or going")

// Event reasons.
const (
	eventCreated        = "Created"
	eventScaled         = "Scaled"
	eventUpdated        = "Updated"
	eventDriftCorrected = "DriftCorrected"
	eventDeleted        = "Deleted"
	eventApplyRejected  = "ApplyRejected"
	eventFieldsNotKept  = "FieldsNotKept"
)

// scope is one reconcile of one Memcached: the phases (phases.go) record in
// it what they observe, for the status, and what they changed, for the
// reconcile's event.
type scope struct {
	*Reconciler
	m *cachev1alpha1.Memcached
	// obs is what the phases observed so far.
	obs status.Observation
	// reports are what the phases changed, told in one event once they
	// have all run.
	reports []report
	// recheck is when the Memcached is to be looked at again though
	// nothing changes: when its certificate's time says something new.
	recheck time.Time
	// tell is what the pods are to be told of (tellPods): the membership's
	// version and the Secret content's digest, each empty when none.
	tell podNews
	// secretsPending: a Secret the Memcached names has not been listed yet,
	// so neither the StatefulSet nor the status can be known.
	secretsPending bool
	// gone: a phase found the Memcached's namespace being deleted.
	gone bool
	// unobserved: the store could not be read before the phases ran.
	unobserved bool
	// replacing: the StatefulSet's phase is replacing a Deployment of the
	// Memcached, whose pods the Service and NetworkPolicy select too.
	replacing bool
	// desiredSet is the StatefulSet the StatefulSet's phase applied (nil
	// when it held it as it is): the rollout's phase brings the pods to
	// its template.
	desiredSet *appsv1ac.StatefulSetApplyConfiguration
	// podPatchLetGo: a patch of a pod failed its test (the store held an
	// older version of it), and the rollout looks again soon rather than
	// only on the pod's next event.
	podPatchLetGo bool
	// handOff is the host name of the slot whose keys the rollout has the
	// other slots take before its memcached loses them (a hand-off); empty
	// when none is.
	handOff string
	// keysMoving: with spec.keyMoves, a move is under way, a slot hands
	// its keys off, or the membership published lacks a slot of the spec
	// (handed off, not yet back); the disruption budget then lets no pod
	// go (desired.Budget).
	keysMoving bool
	// awaited are the pods a step of a move waits for the word of, and
	// retold what to tell them again (scope.retell); empty when none.
	awaited map[string]bool
	retold  string
}

func newScope(r *Reconciler, m *cachev1alpha1.Memcached) *scope {
	return &scope{Reconciler: r, m: m, obs: status.Observation{Image: r.Images.Image(m)}}
}

// observe records what a phase did with an object of kind: for the status,
// whether the object is in the way; for the event, what changed.
func (s *scope) observe(kind owned.Kind, out outcome) {
	if out.notOwned {
		s.obs.NotOwned = append(s.obs.NotOwned, kind)
	}
	s.reports = append(s.reports, out.report)
}

// applyStatus applies the status computed from what the steps observed,
// unless the status fields the operator owns already hold exactly that,
// and records the events that go with a status first saying something.
func (s *scope) applyStatus(ctx context.Context) error {
	m := s.m
	want := cacheac.Memcached(m.Name, m.Namespace).
		WithStatus(status.Status(m, s.obs, metav1.NewTime(s.now()).Rfc3339Copy()))
	recordStatusMetrics(m, want.Status)

	same, err := owned.StatusAppliesNothing(m, want)
	if err != nil {
		return err
	}
	body, err := json.Marshal(want)
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(m)
	sent, wrote := s.sentStatus.Load(key)
	if wrote {
		same = sent.(sentStatus).appliesNothing(m.ResourceVersion, string(body), same)
	}
	if same {
		appliesSkipped.WithLabelValues(kindMemcachedStatus).Inc()
		return nil
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Applying status")
	err = s.Client.Status().Apply(ctx, want, client.FieldOwner(owned.StatusFieldManager), client.ForceOwnership)
	if apierrors.IsNotFound(err) {
		// Deleted since the cache saw it: nothing to report to.
		ctrl.LoggerFrom(ctx).V(1).Info("Not applying status: the Memcached is gone")
		return nil
	}
	if err != nil {
		return fmt.Errorf("applying status of Memcached %s: %w", m.Name, err)
	}
	// held is the Memcached as the apiserver held it before this write, as
	// far as the operator knows: the status events compare with its status.
	held := m
	if wrote {
		held = sent.(sentStatus).heldOver(m)
	}
	// The answer, decoded into want, has the version the write made.
	s.sentStatus.Store(key, sentStatus{over: m.ResourceVersion, made: ptr.Deref(want.ResourceVersion, ""), body: string(body)})
	appliesSent.WithLabelValues(kindMemcachedStatus).Inc()
	s.recordStatusEvents(held)
	return nil
}

// sentStatus is the last status the operator wrote for a Memcached: what
// it sent, the resourceVersion of the Memcached it was computed from
// (over), and the one the write made (made).
type sentStatus struct {
	over, made string
	body       string
}

// appliesNothing tells whether applying body would change nothing, given
// the write w and what the cache's Memcached, of resourceVersion rv, says
// (cacheSays: its status fields of the operator's are body's). Until the
// cache shows the write, the apiserver holds what the write sent, whatever
// the cache's status says: the same body is not sent again, and another is
// sent even where it matches the cache's older status. A StatefulSet
// recreated: "not available" is written, the pods are ready again before
// the cache shows that write, and "available", which the cache still
// says, must be written all the same (the write's arrival in the cache
// reconciles nothing: the Memcached's watch passes on status-only
// changes). Once the cache shows the write, the cache tells.
func (w sentStatus) appliesNothing(rv, body string, cacheSays bool) bool {
	if w.includedIn(rv) {
		return cacheSays
	}
	return body == w.body
}

// heldOver returns the Memcached as the apiserver holds it, given the
// cache's m: m, or where the cache does not show the write w yet, m with
// the status w wrote.
func (w sentStatus) heldOver(m *cachev1alpha1.Memcached) *cachev1alpha1.Memcached {
	if w.includedIn(m.ResourceVersion) {
		return m
	}
	written := &cachev1alpha1.Memcached{}
	if err := json.Unmarshal([]byte(w.body), written); err != nil {
		return m
	}
	held := m.DeepCopy()
	held.Status = written.Status
	return held
}

// includedIn reports whether the cache's version rv of the Memcached is the
// one w made or later. Resource versions compare as numbers
// (apimachinery's resourceversion); where they do not, any version but the
// one w was computed from counts as later.
func (w sentStatus) includedIn(rv string) bool {
	if c, err := resourceversion.CompareResourceVersion(rv, w.made); err == nil {
		return c >= 0
	}
	return rv != w.over
}

// recordStatusEvents records the Warning events of a status just written:
// monitoring without the ServiceMonitor CRD, why the pods are not ready,
// an unusable Secret and a certificate about to expire, each once, with
// the status that first says so. held is the Memcached as the apiserver
// held it before that write: the cache's, or where the cache does not
// show the last write yet, with that write's status, so that a write
// following another closely does not tell its problems again.
func (s *scope) recordStatusEvents(held *cachev1alpha1.Memcached) {
	m, obs := held, s.obs
	if msg := status.CertificateExpiring(m, obs.Certificate, s.now()); msg != "" {
		s.Recorder.Eventf(m, nil, corev1.EventTypeWarning, cachev1alpha1.ReasonCertificateExpiring, "Check", "%s", msg)
	}
	if obs.Monitor == status.MonitorCRDMissing {
		if c := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionMonitored); c == nil || c.Reason != cachev1alpha1.ReasonServiceMonitorCRDMissing {
			s.Recorder.Eventf(m, nil, corev1.EventTypeWarning, cachev1alpha1.ReasonServiceMonitorCRDMissing, "Monitor", "%s", status.MissingCRDMessage(m))
		}
	}
	// The cache may still hold the Memcached from before the last status
	// write: what was told is remembered here, so that a cause is told once.
	key := client.ObjectKeyFromObject(m)
	if reason, message, ok := status.PodProblem(m, obs); ok {
		if was, told := s.toldPodProblems.Swap(key, reason); !told || was != reason {
			s.Recorder.Eventf(m, obs.StatefulSet, corev1.EventTypeWarning, reason, "Observe", "%s", message)
		}
	} else {
		s.toldPodProblems.Delete(key)
	}
	if p := obs.Secret; p != nil {
		if c := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionStalled); c == nil || c.Reason != p.Reason || c.Message != p.Message {
			s.Recorder.Eventf(m, nil, corev1.EventTypeWarning, p.Reason, "Hold", "%s", p.Message)
		}
	}
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
