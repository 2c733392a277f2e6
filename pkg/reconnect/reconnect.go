// Package reconnect makes informers resume within seconds of the
// apiserver coming back.
//
// client-go's reflectors back off from a failed list or watch for up to
// 30 s, with as much jitter again, and keep that pace until two minutes
// pass without a failure: after an outage of half a minute an informer
// can resume a minute after the apiserver serves again (measured with 14
// informers: the last 61 s and 79 s late in two runs), and the operator
// acts on news that old. Its informers instead list and watch through
// ListWatch, which tries again by itself, within MaxDelay, while the
// apiserver cannot be reached, and hands every other error to the
// reflector as before.
package reconnect

import (
	"context"
	"errors"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/klog/v2"
)

// MaxDelay is the longest an informer waits before it tries the
// apiserver again: the most its news can lag once the apiserver serves.
// A dial to an apiserver that is away costs it nothing, and the
// operator's informers number a dozen or so per namespace watched.
const MaxDelay = 2 * time.Second

// backoff is the pace of the tries: from a quarter second, doubling up to
// MaxDelay (each delay up to a tenth longer, so informers that failed
// together do not try in step).
var backoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: MaxDelay}

// ListWatch is lw, its lists and watches tried again while Unreachable
// says their error is the apiserver's absence, until they succeed, fail
// otherwise or their context ends.
func ListWatch(lw toolscache.ListerWatcher) toolscache.ListerWatcher {
	return &listWatch{inner: lw, withContext: toolscache.ToListerWatcherWithContext(lw)}
}

// NewSharedIndexInformer is client-go's NewSharedIndexInformer over
// ListWatch(lw): the signature of controller-runtime's cache.Options's
// NewInformer.
func NewSharedIndexInformer(lw toolscache.ListerWatcher, example runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	return toolscache.NewSharedIndexInformer(ListWatch(lw), example, resync, indexers)
}

type listWatch struct {
	inner       toolscache.ListerWatcher
	withContext toolscache.ListerWatcherWithContext
}

var _ toolscache.ListerWatcherWithContext = &listWatch{}

// List and Watch, without a context to end them, try once: reflectors
// call the methods with a context.
func (l *listWatch) List(o metav1.ListOptions) (runtime.Object, error) {
	return l.inner.List(o)
}

func (l *listWatch) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return l.inner.Watch(o)
}

func (l *listWatch) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	return retry(ctx, "list", func() (runtime.Object, error) { return l.withContext.ListWithContext(ctx, o) })
}

func (l *listWatch) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return retry(ctx, "watch", func() (watch.Interface, error) { return l.withContext.WatchWithContext(ctx, o) })
}

// IsWatchListSemanticsUnSupported passes on what lw says of streaming
// lists, which reflectors ask of their ListerWatcher.
func (l *listWatch) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(l.inner)
}

func retry[T any](ctx context.Context, what string, try func() (T, error)) (T, error) {
	b := backoff
	var failed time.Time
	for {
		v, err := try()
		if err == nil || !Unreachable(err) || ctx.Err() != nil {
			if !failed.IsZero() && err == nil {
				klog.FromContext(ctx).Info("Reached the apiserver again", "request", what, "after", time.Since(failed).Round(time.Millisecond))
			}
			return v, err
		}
		if failed.IsZero() {
			failed = time.Now()
			klog.FromContext(ctx).Info("Cannot reach the apiserver; trying again", "request", what, "within", MaxDelay, "err", err)
		}
		t := time.NewTimer(b.Step())
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
	}
}

// Unreachable says whether err is the apiserver's absence: a connection
// refused, reset or ended early, a dial that failed or timed out, or an
// apiserver not yet (or no longer) serving (503). Refusals it gives for a
// reason (forbidden, too many requests, a resource version too old) are
// not: the reflector handles them.
func Unreachable(err error) bool {
	var op *net.OpError
	switch {
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err):
		return true
	case errors.As(err, &op) && op.Op == "dial":
		return true
	case apierrors.IsServiceUnavailable(err):
		return true
	}
	return false
}
