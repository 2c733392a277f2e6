package reconnect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/example/memcached-operator/internal/testsupport/endpoint"
)

// refused is what a request to an address nothing listens on fails with.
func refused(t *testing.T) error {
	t.Helper()
	_, err := http.Get("http://" + endpoint.Free(t) + "/api")
	if err == nil {
		t.Fatal("a request to a closed port succeeded")
	}
	return fmt.Errorf("listing pods: %w", err)
}

func TestUnreachable(t *testing.T) {
	g := NewWithT(t)
	pods := schema.GroupResource{Resource: "pods"}
	for name, err := range map[string]error{
		"connection refused":    refused(t),
		"connection ended":      io.ErrUnexpectedEOF,
		"dial timed out":        &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("i/o timeout")},
		"apiserver not serving": apierrors.NewServiceUnavailable("not ready"),
	} {
		g.Expect(Unreachable(err)).To(BeTrue(), name)
	}
	for name, err := range map[string]error{
		"none":                  nil,
		"forbidden":             apierrors.NewForbidden(pods, "", errors.New("no")),
		"too many requests":     apierrors.NewTooManyRequests("slow down", 1),
		"resource version gone": apierrors.NewResourceExpired("too old"),
		"internal error":        apierrors.NewInternalError(errors.New("boom")),
		"not found":             apierrors.NewNotFound(pods, "x"),
		"a context that ended":  context.Canceled,
	} {
		g.Expect(Unreachable(err)).To(BeFalse(), name)
	}
}

// counting is a ListerWatcher whose first failures calls fail with err.
func counting(failures int, err error) (*toolscache.ListWatch, *atomic.Int32) {
	var calls atomic.Int32
	fail := func() error {
		if int(calls.Add(1)) <= failures {
			return err
		}
		return nil
	}
	return &toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			if err := fail(); err != nil {
				return nil, err
			}
			return &corev1.PodList{}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			if err := fail(); err != nil {
				return nil, err
			}
			return watch.NewEmptyWatch(), nil
		},
	}, &calls
}

func TestListWatchTriesAgainWhileTheApiserverIsAway(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	lw, calls := counting(3, refused(t))
	start := time.Now()
	list, err := ListWatch(lw).(toolscache.ListerWatcherWithContext).ListWithContext(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list).To(Equal(&corev1.PodList{}))
	g.Expect(calls.Load()).To(BeEquivalentTo(4), "three refusals, then the list")
	// 250 ms, 500 ms, 1 s, each up to a tenth longer: the pace, not a bound.
	g.Expect(time.Since(start)).To(BeNumerically(">=", 1750*time.Millisecond))

	lw, calls = counting(2, apierrors.NewServiceUnavailable("starting"))
	w, err := ListWatch(lw).(toolscache.ListerWatcherWithContext).WatchWithContext(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	w.Stop()
	g.Expect(calls.Load()).To(BeEquivalentTo(3), "a watch too")
}

func TestListWatchHandsOtherErrorsOn(t *testing.T) {
	g := NewWithT(t)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no"))
	lw, calls := counting(5, forbidden)
	_, err := ListWatch(lw).(toolscache.ListerWatcherWithContext).ListWithContext(context.Background(), metav1.ListOptions{})
	g.Expect(err).To(MatchError(forbidden))
	g.Expect(calls.Load()).To(BeEquivalentTo(1), "the reflector handles a refusal")

	gone := apierrors.NewResourceExpired("too old")
	lw, calls = counting(5, gone)
	_, err = ListWatch(lw).(toolscache.ListerWatcherWithContext).WatchWithContext(context.Background(), metav1.ListOptions{})
	g.Expect(err).To(MatchError(gone), "an expired resource version makes the reflector list again")
	g.Expect(calls.Load()).To(BeEquivalentTo(1))
}

func TestListWatchStopsWithItsContext(t *testing.T) {
	g := NewWithT(t)
	lw, calls := counting(1<<30, refused(t))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(600*time.Millisecond, cancel)
	_, err := ListWatch(lw).(toolscache.ListerWatcherWithContext).WatchWithContext(ctx, metav1.ListOptions{})
	g.Expect(Unreachable(err)).To(BeTrue(), "the last failure, once the informer stops")
	g.Expect(calls.Load()).To(BeNumerically("<=", 3))
}

// The reflector asks its ListerWatcher whether it can stream lists.
func TestListWatchPassesOnWatchListSemantics(t *testing.T) {
	g := NewWithT(t)
	lw, _ := counting(0, nil)
	type semantics interface{ IsWatchListSemanticsUnSupported() bool }
	g.Expect(ListWatch(lw).(semantics).IsWatchListSemanticsUnSupported()).To(BeFalse())
	unsupported := toolscache.ToListWatcherWithWatchListSemantics(lw, struct{ semantics }{unsupportedSemantics{}})
	g.Expect(ListWatch(unsupported).(semantics).IsWatchListSemanticsUnSupported()).To(BeTrue())
}

type unsupportedSemantics struct{}

func (unsupportedSemantics) IsWatchListSemanticsUnSupported() bool { return true }
