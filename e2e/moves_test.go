//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/ring"
)

// movedKeys is how many keys the key-move story stores, and rewritten how
// many of them a writer keeps rewriting through every move.
const (
	movedKeys     = 3000
	rewrittenKeys = 200
	// movesWithin bounds a move of that many keys: the copy takes moments,
	// the clients' poll (clientPollSeconds) is 3 s; the rest is slack for
	// a busy machine.
	movesWithin = 2 * time.Minute
)

// ringClient is a client of a Memcached as the libmemcached family is,
// following its discovery endpoint: keys hashed with libmemcached's ketama
// over the slots' host names, sent to the addresses the membership gives.
type ringClient struct {
	mu      sync.Mutex
	ring    *ring.Ring
	addr    map[string]string // by server name
	clients map[string]*memcache.Client
	version int64
}

// follow sets the client's servers from the membership any of addrs'
// endpoints serves.
func (rc *ringClient) follow(addrs []string) error {
	var last error
	for _, a := range addrs {
		conn, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err != nil {
			last = err
			continue
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		c, err := discovery.Ask(conn)
		conn.Close()
		if err != nil {
			last = err
			continue
		}
		r, err := ring.New(ring.Libmemcached, move.Servers(c))
		if err != nil {
			return err
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if rc.clients == nil {
			rc.clients = map[string]*memcache.Client{}
		}
		rc.ring, rc.addr, rc.version = r, map[string]string{}, c.Version
		for _, n := range c.Nodes {
			addr := net.JoinHostPort(n.IP, strconv.Itoa(int(n.Port)))
			rc.addr[move.Server(n)] = addr
			if rc.clients[addr] == nil {
				mc := memcache.New(addr)
				mc.Timeout = 3 * time.Second
				rc.clients[addr] = mc
			}
		}
		return nil
	}
	return last
}

// server is the client of key's server now; an error before the client
// has followed a membership.
func (rc *ringClient) server(key string) (*memcache.Client, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.ring == nil {
		return nil, errors.New("no membership followed yet")
	}
	mc := rc.clients[rc.addr[rc.ring.Server(key)]]
	if mc == nil {
		return nil, fmt.Errorf("no server for %q in membership %d", key, rc.version)
	}
	return mc, nil
}

func (rc *ringClient) set(key, value string) error {
	mc, err := rc.server(key)
	if err != nil {
		return err
	}
	return mc.Set(&memcache.Item{Key: key, Value: []byte(value)})
}

// get is key's value, "" on a miss.
func (rc *ringClient) get(key string) (string, error) {
	mc, err := rc.server(key)
	if err != nil {
		return "", err
	}
	it, err := mc.Get(key)
	if err == memcache.ErrCacheMiss {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(it.Value), nil
}

// writer rewrites keys 0..rewrittenKeys-1 with ever newer values through
// rc, polling the membership every second, until stopped; latest is each
// key's last value written, uncertain the keys whose last write failed.
type writer struct {
	latest    map[string]string
	uncertain map[string]bool
	writes    int
	stop      chan struct{}
	done      chan struct{}
}

func startWriter(t *testing.T, rc *ringClient, endpoints func() []string, latest map[string]string) *writer {
	w := &writer{latest: latest, uncertain: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		polled := time.Now()
		for round := 0; ; round++ {
			for i := range rewrittenKeys {
				select {
				case <-w.stop:
					return
				default:
				}
				if time.Since(polled) > time.Second {
					if err := rc.follow(endpoints()); err != nil {
						t.Logf("the writer keeps its membership: %v", err)
					}
					polled = time.Now()
				}
				k, v := keyName(i), fmt.Sprintf("w%d-%d", round, i)
				if err := rc.set(k, v); err != nil {
					w.uncertain[k] = true
					continue
				}
				w.latest[k], w.writes = v, w.writes+1
				delete(w.uncertain, k)
				time.Sleep(2 * time.Millisecond)
			}
		}
	}()
	return w
}

func (w *writer) halt() { close(w.stop); <-w.done }

func keyName(i int) string { return fmt.Sprintf("moved-%d", i) }

// pinned is a client that keeps rc's membership of now whatever is
// published later: a client whose poll has not come yet.
func (rc *ringClient) pinned() *ringClient {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return &ringClient{ring: rc.ring, addr: maps.Clone(rc.addr), clients: maps.Clone(rc.clients), version: rc.version}
}

// current is the ring the client follows now.
func (rc *ringClient) current() *ring.Ring {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.ring
}

// expectOldMembershipServes reads, through late's membership, keys that
// the membership next (just seen published) gives another slot and that
// the writer leaves alone, again and again for 2 s: each holds its value
// throughout on its old slot, as the keys are removed from their old slots
// only once the clients have polled (spec.keyMoves.clientPollSeconds, 3 s
// here, counted from the publication, which was seen after it).
func expectOldMembershipServes(t *testing.T, late *ringClient, next *ring.Ring) {
	t.Helper()
	var keys []int
	for i := rewrittenKeys; i < movedKeys && len(keys) < 100; i++ {
		if k := keyName(i); late.ring.Server(k) != next.Server(k) {
			keys = append(keys, i)
		}
	}
	NewWithT(t).Expect(len(keys)).To(BeNumerically(">", 10))
	rounds, misses := 0, 0
	for until := time.Now().Add(2 * time.Second); time.Now().Before(until); rounds++ {
		for _, i := range keys {
			if got, err := late.get(keyName(i)); err != nil || got != "v-"+strconv.Itoa(i) {
				misses++
			}
		}
	}
	t.Logf("through the membership before the move, for 2 s after the next was seen published: %d reads of %d keys that move, %d missed", rounds*len(keys), len(keys), misses)
	NewWithT(t).Expect(misses).To(BeZero(), "keys are removed from their old slots before the clients' poll")
}

// publishedMoving waits until the membership of size slots is published
// with its move under way, and returns its ring.
func publishedMoving(t *testing.T, c client.Client, ns string, size int) *ring.Ring {
	t.Helper()
	var next *ring.Ring
	NewWithT(t).Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: desired.MembershipName("moving")}, cm)).To(Succeed())
		cl, err := discovery.Parse([]byte(cm.Data[desired.MembershipKey]))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cl.Nodes).To(HaveLen(size))
		g.Expect(cm.Data).To(HaveKey(desired.MoveKey), "published with the move under way")
		next, err = ring.New(ring.Libmemcached, move.Servers(cl))
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(movesWithin).WithPolling(200 * time.Millisecond).Should(Succeed())
	return next
}

// saidMoving tells whether any of the statuses seen said, in Progressing,
// that keys were moving.
func saidMoving(seen []cachev1alpha1.Memcached) bool {
	for _, m := range seen {
		if p := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionProgressing); p != nil && p.Reason == cachev1alpha1.ReasonMovingKeys {
			return true
		}
	}
	return false
}

// readBack reads every key through rc, once the writer w has stopped: what
// each reads, and how many hold their last value (latest), read as a miss,
// or read older than the last written (an error each; a key whose last
// write failed may hold either).
func readBack(t *testing.T, rc *ringClient, w *writer, latest map[string]string) (got map[string]string, kept, missed, stale int) {
	t.Helper()
	got = map[string]string{}
	for i := range movedKeys {
		k := keyName(i)
		v, err := rc.get(k)
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), "reading %s", k)
		got[k] = v
		switch {
		case v == latest[k]:
			kept++
		case v == "":
			missed++
		case !w.uncertain[k]:
			stale++
			t.Errorf("%s reads %q, older than the last value written, %q", k, v, latest[k])
		}
	}
	return got, kept, missed, stale
}

// keyMovingMemcached runs the Memcached key, of three slots on the real
// node with spec.keyMoves (libmemcached's ring, a poll of 3 s), has rc
// follow its membership, and stores movedKeys keys through it, each one's
// value in latest.
func keyMovingMemcached(t *testing.T, cfg *envconf.Config, key client.ObjectKey, rc *ringClient, latest map[string]string, endpoints func() []string) {
	t.Helper()
	spec := onRealNode(3)
	spec.KeyMoves = &cachev1alpha1.KeyMovesSpec{Ring: string(ring.Libmemcached), ClientPollSeconds: ptr.To[int32](3)}
	runningMemcached(t, cfg, key, spec)
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		g.Expect(rc.follow(endpoints())).To(Succeed())
		g.Expect(rc.addr).To(HaveLen(3))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	for i := range movedKeys {
		k := keyName(i)
		latest[k] = "v-" + strconv.Itoa(i)
		g.Expect(rc.set(k, latest[k])).To(Succeed())
	}
}

// discoveryEndpoints are the discovery endpoints of the pods of the
// Memcached key now.
func discoveryEndpoints(t *testing.T, cfg *envconf.Config, key client.ObjectKey) []string {
	pods := &corev1.PodList{}
	if err := kube(t, cfg).List(context.Background(), pods, client.InNamespace(key.Namespace), client.MatchingLabels{desired.LabelInstance: key.Name}); err != nil {
		return nil
	}
	var out []string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			out = append(out, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(desired.DiscoveryPort))))
		}
	}
	return out
}

// A Memcached whose clients hash with libmemcached's ketama
// (spec.keyMoves) keeps its keys through a scale-up made through the scale
// subresource, as an HPA makes it, and through a scale-down: each key is
// copied to the slot the new membership gives it before that membership is
// published, and removed from its old slot after the clients' poll. A
// writer rewrites keys throughout; no read returns a value older than the
// last one written, and the leaving pod is removed only once its keys have
// moved.
func TestAScaleMovesTheKeys(t *testing.T) {
	t.Parallel()
	var ns string
	key := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "moving"} }
	rc := &ringClient{}
	latest := map[string]string{}
	endpoints := func(t *testing.T, cfg *envconf.Config) func() []string {
		return func() []string { return discoveryEndpoints(t, cfg, key()) }
	}
	// moved waits until the move to size slots from the ring before has
	// ended, then reads every key through the new membership: none holds
	// an older value than the last written, and at least 95% of the keys
	// the move gave another slot that the writer left alone hold theirs
	// (those the writer rewrote after it followed the move are on their
	// new slot whatever the mover did; they count for staleness only).
	moved := func(t *testing.T, cfg *envconf.Config, size int, w *writer, before *ring.Ring) {
		t.Helper()
		g, c := NewWithT(t), kube(t, cfg)
		g.Eventually(func(g Gomega) {
			cm := &corev1.ConfigMap{}
			g.Expect(c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: desired.MembershipName("moving")}, cm)).To(Succeed())
			g.Expect(cm.Data).NotTo(HaveKey(desired.MoveKey), "the move is under way")
			cl, err := discovery.Parse([]byte(cm.Data[desired.MembershipKey]))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cl.Nodes).To(HaveLen(size))
			g.Expect(rc.follow(endpoints(t, cfg)())).To(Succeed())
			g.Expect(rc.version).To(Equal(cl.Version), "the client has the membership")
		}).WithTimeout(movesWithin).WithPolling(poll).Should(Succeed())
		w.halt()
		t.Logf("the writer wrote %d values during the move", w.writes)
		after := rc.current()
		got, kept, missed, stale := readBack(t, rc, w, latest)
		moving, movedKept := 0, 0
		for i := rewrittenKeys; i < movedKeys; i++ {
			if k := keyName(i); before.Server(k) != after.Server(k) {
				moving++
				if got[k] == latest[k] {
					movedKept++
				}
			}
		}
		t.Logf("after the move to %d slots: %d of %d keys kept, %d missed, %d stale; of the %d keys moved that the writer left alone, %d kept",
			size, kept, movedKeys, missed, stale, moving, movedKept)
		g.Expect(stale).To(BeZero())
		g.Expect(moving).To(BeNumerically(">=", movedKeys/10), "the scale moved keys")
		g.Expect(float64(movedKept) / float64(moving)).To(BeNumerically(">=", 0.95))
		g.Expect(float64(kept) / movedKeys).To(BeNumerically(">=", 0.95))
		g.Expect(eventsOf(g, t, cfg, key(), "KeyMoveIncomplete")).To(BeEmpty())
	}
	f := features.New("a scale moves the keys").WithLabel("needs", "containers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if provider != "local" {
				t.Skip("reaches the pods' addresses from this machine: local cluster only")
			}
			ns = namespace(t, cfg, "moving")
			keyMovingMemcached(t, cfg, key(), rc, latest, endpoints(t, cfg))
			return ctx
		}).
		Assess("a scale-up through the scale subresource copies the new slot's keys before it is published", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			statuses := startWatch(t, c, key())
			before, late := rc.current(), rc.pinned()
			w := startWriter(t, rc, endpoints(t, cfg), latest)
			m := &cachev1alpha1.Memcached{}
			g.Expect(c.Get(ctx, key(), m)).To(Succeed())
			scale := &autoscalingv1.Scale{}
			g.Expect(c.SubResource("scale").Get(ctx, m, scale)).To(Succeed())
			scale.Spec.Replicas = 4
			g.Expect(c.SubResource("scale").Update(ctx, m, client.WithSubResourceBody(scale), client.FieldOwner("horizontal-pod-autoscaler"))).To(Succeed())
			// A client that has yet to poll still finds the keys that move
			// on their old slots: they leave them only after the clients'
			// poll.
			expectOldMembershipServes(t, late, publishedMoving(t, c, ns, 4))
			moved(t, cfg, 4, w, before)
			g.Expect(eventsOf(g, t, cfg, key(), "KeysMoved")).To(HaveLen(1))
			g.Expect(saidMoving(statuses.stop())).To(BeTrue(), "Progressing said the keys were moving")
			return ctx
		}).
		Assess("a scale-down copies the leaving slot's keys, and removes its pod only after", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			statuses := startWatch(t, c, key())
			before, late := rc.current(), rc.pinned()
			w := startWriter(t, rc, endpoints(t, cfg), latest)
			m := &cachev1alpha1.Memcached{}
			g.Expect(c.Get(ctx, key(), m)).To(Succeed())
			g.Expect(c.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":3}}`)))).To(Succeed())
			// The leaving pod serves while the membership without it is
			// published and the clients poll it, and a client that has yet
			// to poll still finds the leaving slot's keys there.
			next := publishedMoving(t, c, ns, 3)
			leaving := &corev1.Pod{}
			g.Expect(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "moving-3"}, leaving)).To(Succeed())
			g.Expect(leaving.DeletionTimestamp).To(BeNil())
			expectOldMembershipServes(t, late, next)
			moved(t, cfg, 3, w, before)
			g.Expect(saidMoving(statuses.stop())).To(BeTrue(), "Progressing said the keys were moving")
			g.Eventually(func() bool {
				return apierrors.IsNotFound(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "moving-3"}, &corev1.Pod{}))
			}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "the leaving pod is removed once its keys moved")
			g.Expect(eventsOf(g, t, cfg, key(), "KeysMoved")).To(HaveLen(2))
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
