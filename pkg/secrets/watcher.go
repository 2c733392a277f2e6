package secrets

import (
	"context"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/example/memcached-operator/pkg/reconnect"
)

// Watcher follows the Secrets that Memcacheds name. Each Secret has a watch
// of its own, by name (a list and watch with a field selector on
// metadata.name, which the apiserver authorizes as a request for that one
// name), started when a first Memcached names it and stopped when the last
// one stops. Of each Secret it keeps only its Summary.
type Watcher struct {
	client kubernetes.Interface
	notify func(types.NamespacedName)

	mu sync.Mutex
	// ctx is the watches' parent; nil before Start.
	ctx     context.Context
	secrets map[types.NamespacedName]*watched
	// uses are the Secrets each Memcached names.
	uses map[types.NamespacedName][]types.NamespacedName
}

type watched struct {
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
	users    map[types.NamespacedName]bool
	// lastErr is the watch's last error, until it lists again.
	lastErr error
}

// NewWatcher returns a Watcher that reads Secrets with client and calls
// notify with each Memcached that names a Secret, when that Secret's
// summary changes, and when its watch first has an answer. It follows
// nothing until Start.
func NewWatcher(client kubernetes.Interface, notify func(memcached types.NamespacedName)) *Watcher {
	return &Watcher{
		client:  client,
		notify:  notify,
		secrets: map[types.NamespacedName]*watched{},
		uses:    map[types.NamespacedName][]types.NamespacedName{},
	}
}

// Start runs the watches until ctx is done (a manager Runnable).
func (w *Watcher) Start(ctx context.Context) error {
	w.mu.Lock()
	w.ctx = ctx
	for key, s := range w.secrets {
		w.run(key, s)
	}
	w.mu.Unlock()
	<-ctx.Done()
	return nil
}

// NeedLeaderElection: the watches serve the controller, which runs on the
// leader only; a follower names no Secret and watches none.
func (w *Watcher) NeedLeaderElection() bool { return true }

// Follow records that the Memcached named memcached names the Secrets
// names of its namespace, and no other: watches start for Secrets no
// Memcached named before, and stop for those no Memcached names any
// longer. A Memcached that names none is forgotten (as by Forget).
func (w *Watcher) Follow(memcached types.NamespacedName, names ...string) {
	keys := make([]types.NamespacedName, 0, len(names))
	for _, n := range names {
		keys = append(keys, types.NamespacedName{Namespace: memcached.Namespace, Name: n})
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.uses[memcached]
	if slices.Equal(old, keys) {
		return
	}
	for _, key := range old {
		if slices.Contains(keys, key) {
			continue
		}
		s := w.secrets[key]
		delete(s.users, memcached)
		if len(s.users) == 0 {
			if s.stop != nil {
				s.stop()
			}
			delete(w.secrets, key)
		}
	}
	for _, key := range keys {
		s, ok := w.secrets[key]
		if !ok {
			s = w.newWatch(key)
			w.secrets[key] = s
			if w.ctx != nil {
				w.run(key, s)
			}
		}
		s.users[memcached] = true
	}
	if len(keys) == 0 {
		delete(w.uses, memcached)
	} else {
		w.uses[memcached] = keys
	}
}

// Forget stops following the Secrets of the Memcached named memcached,
// which is gone: the watches no other Memcached needs stop.
func (w *Watcher) Forget(memcached types.NamespacedName) {
	w.Follow(memcached)
}

// State is what the Watcher knows of one Secret.
type State struct {
	// Synced: the watch has listed the Secret at least once.
	Synced bool
	// Summary is the Secret's, or nil when it does not exist (or the watch
	// has not listed it yet).
	Summary *Summary
	// Err is the watch's last error while it has not listed: why the
	// Secret cannot be known (such as a missing permission).
	Err error
}

// Get tells what is known of the Secret key, which some Memcached must
// Follow; a Secret no Memcached names is not followed, and not Synced.
func (w *Watcher) Get(key types.NamespacedName) State {
	w.mu.Lock()
	s, ok := w.secrets[key]
	var lastErr error
	if ok {
		lastErr = s.lastErr
	}
	w.mu.Unlock()
	if !ok || !s.informer.HasSynced() {
		return State{Err: lastErr}
	}
	st := State{Synced: true}
	if obj, found, _ := s.informer.GetStore().GetByKey(key.String()); found {
		st.Summary = obj.(*Summary)
	}
	return st
}

func (w *Watcher) newWatch(key types.NamespacedName) *watched {
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", key.Name).String()
	}
	secrets := w.client.CoreV1().Secrets(key.Namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			byName(&o)
			return secrets.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			byName(&o)
			return secrets.Watch(ctx, o)
		},
	}
	inf := reconnect.NewSharedIndexInformer(lw, &corev1.Secret{}, 0, cache.Indexers{})
	s := &watched{informer: inf, users: map[types.NamespacedName]bool{}}
	// The data goes no further than this.
	_ = inf.SetTransform(func(obj any) (any, error) {
		if secret, ok := obj.(*corev1.Secret); ok {
			return summarize(secret), nil
		}
		return obj, nil
	})
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		w.mu.Lock()
		s.lastErr = err
		w.mu.Unlock()
		cache.DefaultWatchErrorHandler(ctx, r, err)
		w.notifyUsers(key)
	})
	changed := func(any) { w.notifyUsers(key) }
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: changed,
	})
	return s
}

// run starts s's watch; w.mu is held.
func (w *Watcher) run(key types.NamespacedName, s *watched) {
	ctx, cancel := context.WithCancel(w.ctx)
	s.stop = cancel
	go s.informer.RunWithContext(ctx)
	go func() {
		// A Secret that does not exist raises no event: tell its users
		// that the watch has answered.
		if cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
			w.mu.Lock()
			s.lastErr = nil
			w.mu.Unlock()
			w.notifyUsers(key)
		}
	}()
}

func (w *Watcher) notifyUsers(key types.NamespacedName) {
	w.mu.Lock()
	var users []types.NamespacedName
	if s, ok := w.secrets[key]; ok {
		for u := range s.users {
			users = append(users, u)
		}
	}
	w.mu.Unlock()
	for _, u := range users {
		w.notify(u)
	}
}
