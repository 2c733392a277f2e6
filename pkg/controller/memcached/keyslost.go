package memcached

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/owned"
)

// eventKeysLost (Warning): a slot's pod went without handing its keys off.
const eventKeysLost = "KeysLost"

// keysLostKey is a slot's new address, told once.
type keysLostKey struct {
	memcached  types.NamespacedName
	host, addr string
}

// tellKeysLost records a Warning event, once per slot and new address, for
// each slot the clients' membership (published) lists at one address and
// the next membership at another. With key moves, a slot whose pod goes
// by the rollout or with a grace period leaves the membership first (its
// keys handed off) and comes back with a move: a slot whose address
// changes while it is listed lost its pod's keys. Its pod was deleted with
// no grace period, went with its node, handed off while the operator was
// away (its copies taken back), or was the cache's only slot.
func (s *scope) tellKeysLost(published, next discovery.Cluster) {
	was := map[string]string{}
	for _, n := range published.Nodes {
		was[n.Host] = n.IP
	}
	for _, n := range next.Nodes {
		old := was[n.Host]
		if old == "" || old == n.IP {
			continue
		}
		key := keysLostKey{memcached: types.NamespacedName{Namespace: s.m.Namespace, Name: s.m.Name}, host: n.Host, addr: n.IP}
		if _, told := s.toldKeysLost.LoadOrStore(key, true); told {
			continue
		}
		slotKeysLost.WithLabelValues(s.m.Namespace, s.m.Name).Inc()
		for _, p := range s.obs.Pods {
			if k, ok := ordinal(p.Name, s.m.Name); ok && desired.SlotHost(s.m.Name, s.m.Namespace, int(k)) == n.Host {
				s.podEvent(p, corev1.EventTypeWarning, eventKeysLost, "Observe",
					"Pod %s was replaced without handing its keys off (deleted with no grace period, gone with its node, handed off while the operator was away, or the only slot): the keys its slot held at %s are lost; its new pod at %s serves empty",
					p.Name, old, n.IP)
			}
		}
	}
}

// tellHandOffsLost records a Warning event, once per slot and address,
// for each slot being handed off (it leaves the membership of from for
// to: its pod gone, being deleted, or the one the rollout replaces) whose
// pod ended the copy step without saying it copied its keys (said): a pod
// deleted with no grace period is gone before its copy, its keys with it.
func (s *scope) tellHandOffsLost(from, to discovery.Cluster, said stepReports) {
	pods := map[string]*owned.Pod{}
	for _, p := range s.obs.Pods {
		pods[p.Name] = p
	}
	for _, n := range from.Nodes {
		name, pod := podOf(n), pods[podOf(n)]
		handingOff := pod == nil || pod.Deleting || n.Host == s.handOff
		if listsSlot(to, n.Host) || !handingOff || slices.Contains(said.done, name) {
			continue
		}
		key := keysLostKey{memcached: types.NamespacedName{Namespace: s.m.Namespace, Name: s.m.Name}, host: n.Host, addr: n.IP}
		if _, told := s.toldKeysLost.LoadOrStore(key, true); told {
			continue
		}
		slotKeysLost.WithLabelValues(s.m.Namespace, s.m.Name).Inc()
		note, args := "Pod %s went before it handed its keys off (%s): the keys its slot held at %s are lost; the slot comes back empty", []any{name, said.of(name, moveStepBound), n.IP}
		if pod == nil {
			s.Recorder.Eventf(s.m, nil, corev1.EventTypeWarning, eventKeysLost, "Move", note, args...)
			continue
		}
		s.podEvent(pod, corev1.EventTypeWarning, eventKeysLost, "Move", note, args...)
	}
}

// forgetKeysLost forgets what was told of the Memcached key's slots.
func (r *Reconciler) forgetKeysLost(key types.NamespacedName) {
	r.toldKeysLost.Range(func(k, _ any) bool {
		if k.(keysLostKey).memcached == key {
			r.toldKeysLost.Delete(k)
		}
		return true
	})
}
