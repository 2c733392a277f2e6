package memcached

import (
	"context"
	"errors"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/example/memcached-operator/pkg/reconnect"
)

// reconcileResult is what a reconcile that asked to look again at result and
// failed with errs returns to controller-runtime. A failure is retried
// with the controller's backoff, which doubles up to minutes; one that
// only a spec change can fix is terminal; and while the apiserver cannot
// be reached at all, the reconcile looks again every reconnect.MaxDelay,
// as the informers do, so its changes are applied within seconds of the
// apiserver's return rather than after a backoff that grew all through
// the outage.
func reconcileResult(ctx context.Context, result ctrl.Result, errs []error) (ctrl.Result, error) {
	switch {
	case len(errs) == 0:
		return result, nil
	case allRefused(errs):
		// Only a spec change can fix it, and a spec change is an event.
		return ctrl.Result{}, reconcile.TerminalError(errors.Join(errs...))
	case allUnreachable(errs):
		ctrl.LoggerFrom(ctx).Info("Cannot reach the apiserver; looking again soon", "after", reconnect.MaxDelay, "err", errors.Join(errs...))
		return ctrl.Result{RequeueAfter: reconnect.MaxDelay}, nil
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// sooner is the result that looks again first: a requeue at all before
// none, and the shorter of two.
func sooner(a, b ctrl.Result) ctrl.Result {
	if a.RequeueAfter == 0 || (b.RequeueAfter > 0 && b.RequeueAfter < a.RequeueAfter) {
		return b
	}
	return a
}

// refusedError is the apiserver's refusal of an object as the operator
// built it (invalid, or a bad request): retrying sends the same, so only a
// spec change can fix it.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }

func (e *refusedError) Unwrap() error { return e.err }

func allRefused(errs []error) bool {
	for _, err := range errs {
		if refused := (*refusedError)(nil); !errors.As(err, &refused) {
			return false
		}
	}
	return true
}

func allUnreachable(errs []error) bool {
	for _, err := range errs {
		if !reconnect.Unreachable(err) {
			return false
		}
	}
	return true
}
