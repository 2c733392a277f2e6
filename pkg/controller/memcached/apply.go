package memcached

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/pkg/jsonconv"
	"github.com/example/memcached-operator/pkg/owned"
)

// apply applies want over current, the Memcached's object of kind k (nil
// when there is none), when what FieldManager owns of it differs. It
// records an event at once for restored drift; what else it changed is in
// the outcome's report. The apiserver's refusal of want is a
// *refusedError.
//
// A Memcached deleted after the cache last saw it gets its objects created
// all the same, owned by a UID that no longer exists: the garbage collector
// deletes them (TestObjectsOfADeletedMemcachedAreCollected). Reading the
// Memcached before each creation to prevent that cost a request per
// created object.
func (s *scope) apply(ctx context.Context, k ownedKind, current *owned.Summary, want runtime.ApplyConfiguration) (outcome, error) {
	m := s.m
	out := outcome{obj: current}

	var lostTo []string
	if current != nil {
		same, err := current.AppliesNothing(want)
		if err != nil {
			return out, err
		}
		if same {
			appliesSkipped.WithLabelValues(string(k.Kind)).Inc()
			return out, nil
		}
		if lostTo, err = s.whoChanged(ctx, k, current, want); err != nil {
			return out, err
		}
	}
	// What the object's digest will be after the apply, and, for an object
	// that exists, what is sent (learnNotKept may need it): read from want before
	// the apply writes the answer into it.
	wantDigest, err := owned.DigestOf(want, s.Schemas)
	if err != nil {
		return out, err
	}
	var sent []byte
	if current != nil {
		if sent, err = json.Marshal(want); err != nil {
			return out, err
		}
	}
	if err := s.send(ctx, k, want, current == nil); err != nil {
		return out, err
	}
	// Apply wrote the apiserver's answer into want.
	applied, err := summaryOfAnswer(k, want)
	if err != nil {
		return out, err
	}
	out.obj = applied
	out.changed = current == nil || applied.ResourceVersion != current.ResourceVersion
	if !out.changed {
		return out, s.learnNotKept(ctx, k, current, wantDigest, json.RawMessage(sent))
	}
	s.Owned.RememberApplied(current, applied, wantDigest)
	if len(lostTo) > 0 {
		driftCorrected.WithLabelValues(string(k.Kind)).Inc()
		s.Recorder.Eventf(m, applied, corev1.EventTypeNormal, eventDriftCorrected, "CorrectDrift",
			"Restored fields of %s %s changed by %v", k.Kind, applied.Name, lostTo)
	}
	out.report = describe(m, k.Kind, current, applied, len(lostTo) > 0)
	return out, nil
}

// send applies want, the object of kind k, under the operator's field
// manager. The apiserver's refusal of want is a *refusedError; a namespace
// being deleted is errMemcachedGone.
//
// An apply that creates (the store knows no object of that name) takes no
// field from another manager: should an object of that name exist after
// all (made a moment ago, and not in the store's watch yet), the apiserver
// answers with a conflict instead of handing it to the operator, and the
// retry finds it in the store, not the operator's. Every other apply takes
// back the fields the operator sets.
func (s *scope) send(ctx context.Context, k ownedKind, want runtime.ApplyConfiguration, create bool) error {
	m := s.m
	log := ctrl.LoggerFrom(ctx)
	log.Info("Applying object", "kind", k.Kind)
	opts := []client.ApplyOption{client.FieldOwner(owned.FieldManager)}
	if !create {
		opts = append(opts, client.ForceOwnership)
	}
	err := s.Client.Apply(ctx, want, opts...)
	switch {
	case create && apierrors.IsConflict(err):
		return fmt.Errorf("creating %s %s: one of that name exists that the operator has not seen yet: %w", k.Kind, k.key(m).Name, err)
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) || namespaceGone(err):
		// The namespace is going away, or gone, and the Memcached with it:
		// nothing to create, and no status worth writing.
		log.V(1).Info("Not applying: the namespace is terminating or gone", "kind", k.Kind)
		return errMemcachedGone
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		log.Error(err, "The apiserver refused the object", "kind", k.Kind)
		s.Recorder.Eventf(m, nil, corev1.EventTypeWarning, eventApplyRejected, "Apply",
			"The apiserver refused %s %s: %v", k.Kind, k.key(m).Name, err)
		return &refusedError{fmt.Errorf("the apiserver refused %s %s: %w", k.Kind, k.key(m).Name, err)}
	case err != nil:
		return fmt.Errorf("applying %s %s: %w", k.Kind, k.key(m).Name, err)
	}
	appliesSent.WithLabelValues(string(k.Kind)).Inc()
	return nil
}

// namespaceGone tells whether err is the apiserver's answer that the
// namespace of the object no longer exists: a reconcile the cache started
// before its Memcached's namespace was deleted.
func namespaceGone(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Kind == "namespaces"
}

// whoChanged names the managers that took fields of current from the
// operator. A summary tells only whether the operator owns exactly the
// fields it is about to apply; when it does not, the object is read from
// the apiserver with every manager's field set: a read only when an apply
// is due anyway, and only when it sets fields the operator does not own, or
// no longer sets some it owns.
func (s *scope) whoChanged(ctx context.Context, k ownedKind, current *owned.Summary, want runtime.ApplyConfiguration) ([]string, error) {
	exactly, err := current.OwnsExactly(want, s.Schemas)
	if err != nil || exactly {
		return nil, err
	}
	live := k.New()
	err = s.APIReader.Get(ctx, client.ObjectKeyFromObject(current), live)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("getting %s %s: %w", k.Kind, current.Name, err)
	}
	return owned.ManagersOfLostFields(live, want, s.Schemas)
}

// learnNotKept follows an apply that changed nothing on current, though what
// the operator owns of it differed from what it sent (whose digest is
// applied): the apiserver does not keep what the operator sends as sent.
// Most often it drops fields that its Kubernetes version does not serve, or
// serves behind a feature gate that is off (matchLabelKeys of pod affinity
// terms before 1.31, for one), or an admission policy or webhook removes
// them. The store learns it, so that the same apply
// is not sent again at every resync, and the fields are named in a Warning
// event: they have no effect in this cluster. The object is read to name
// them, once: the answer to the apply, decoded over what was sent, cannot
// tell what the apiserver left out.
func (s *scope) learnNotKept(ctx context.Context, k ownedKind, current *owned.Summary, applied owned.Digest, sent json.RawMessage) error {
	s.Owned.RememberNotKept(current, applied)
	live := k.New()
	if err := s.APIReader.Get(ctx, client.ObjectKeyFromObject(current), live); err != nil {
		return client.IgnoreNotFound(err)
	}
	fields, err := owned.FieldsNotKept(sent, live)
	if err != nil {
		return err
	}
	if len(fields) == 0 {
		return s.learnDefaulted(ctx, k, live, sent)
	}
	ctrl.LoggerFrom(ctx).Info("The apiserver keeps the object otherwise than applied", "kind", k.Kind, "fieldsNotKept", fields)
	fieldsNotKept.WithLabelValues(string(k.Kind)).Inc()
	s.Recorder.Eventf(s.m, current, corev1.EventTypeWarning, eventFieldsNotKept, "Apply",
		"The apiserver did not keep fields the operator set on %s %s as set; they have no effect in this cluster (its Kubernetes version does not serve them or has their feature gate off, or an admission policy or webhook removes them): %s",
		k.Kind, current.Name, strings.Join(fields, ", "))
	return nil
}

// summaryOfAnswer is the summary of the apiserver's answer to an apply,
// which Client.Apply decoded into want.
func summaryOfAnswer(k ownedKind, want runtime.ApplyConfiguration) (*owned.Summary, error) {
	obj := k.New()
	if err := jsonconv.Convert(want, obj); err != nil {
		return nil, err
	}
	return owned.SummarizeAnswer(obj)
}

// learnDefaulted follows an apply whose every value the apiserver kept,
// though what the operator owns differs from what it sent: the apiserver
// set defaults within the fields the operator applies, and gave it their
// ownership. They are named in the log, for the builder to set them as
// the apiserver does; the store has learned the digest, and no event is
// recorded: nothing the user asked for lacks its effect.
func (s *scope) learnDefaulted(ctx context.Context, k ownedKind, live client.Object, sent json.RawMessage) error {
	have, err := k.Extract(live, s.Schemas)
	if err != nil {
		return err
	}
	defaulted, err := owned.FieldsNotKept(have, sent)
	if err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("The apiserver set defaults within the fields the operator applies", "kind", k.Kind, "fieldsDefaulted", defaulted)
	return nil
}
