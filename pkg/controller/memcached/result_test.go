package memcached

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/example/memcached-operator/internal/testsupport/endpoint"
	"github.com/example/memcached-operator/pkg/reconnect"
)

// refusedConnection is what a request fails with when nothing listens.
func refusedConnection(t *testing.T) error {
	t.Helper()
	_, err := http.Get("http://" + endpoint.Free(t) + "/apis/apps/v1/statefulsets")
	if err == nil {
		t.Fatal("a request to a closed port succeeded")
	}
	return err
}

// While the apiserver cannot be reached, a reconcile looks again every
// reconnect.MaxDelay with no error (controller-runtime's backoff would
// grow through the outage); any other failure among them keeps the
// backoff, and refusals alone are terminal.
func TestReconcileResult(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	away := refusedConnection(t)
	phase := func(name string, err error) error { return fmt.Errorf("%s phase: %w", name, err) }
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "cache", errors.New("no"))
	soon := ctrl.Result{RequeueAfter: time.Hour}

	res, err := reconcileResult(ctx, soon, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(soon), "no failure: the phases' own look again")

	res, err = reconcileResult(ctx, soon, []error{phase("StatefulSet", away), phase("status", away)})
	g.Expect(err).NotTo(HaveOccurred(), "an unreachable apiserver is not retried with the growing backoff")
	g.Expect(res).To(Equal(ctrl.Result{RequeueAfter: reconnect.MaxDelay}))

	res, err = reconcileResult(ctx, soon, []error{phase("StatefulSet", away), phase("Service", forbidden)})
	g.Expect(err).To(MatchError(forbidden), "another failure keeps the controller's backoff")
	g.Expect(errors.Is(err, reconcile.TerminalError(nil))).To(BeFalse())
	g.Expect(res).To(Equal(ctrl.Result{}))

	res, err = reconcileResult(ctx, soon, []error{phase("Service", &refusedError{apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "cache", nil)})})
	g.Expect(errors.Is(err, reconcile.TerminalError(nil))).To(BeTrue(), "refusals alone are terminal")
	g.Expect(res).To(Equal(ctrl.Result{}))
}

// An apply into a namespace that no longer exists is the Memcached gone,
// not a failure to retry; another object's absence is not.
func TestANamespaceGoneIsTheMemcachedGone(t *testing.T) {
	gone := apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns")
	if !namespaceGone(fmt.Errorf("applying StatefulSet cache: %w", gone)) {
		t.Errorf("%v: not taken for the namespace gone", gone)
	}
	if other := apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "cache"); namespaceGone(other) {
		t.Errorf("%v: taken for the namespace gone", other)
	}
}
