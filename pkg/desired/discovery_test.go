package desired

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/discovery"
)

func TestMembershipListsTheSlotsAndVersionsEachChange(t *testing.T) {
	m := memcached("cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)})
	node := func(k int, ip string) discovery.Node {
		return discovery.Node{Host: SlotHost("cache", "ns", k), IP: ip, Port: 11211}
	}
	three := discovery.Cluster{Version: 4, Nodes: []discovery.Node{node(0, "10.0.0.1"), node(1, "10.0.0.2"), node(2, "10.0.0.3")}}
	for _, tc := range []struct {
		name      string
		m         *cachev1alpha1.Memcached
		ips       map[string]string // served on 11211
		addrs     map[string]PodAddress
		published discovery.Cluster
		leaving   string
		want      discovery.Cluster
	}{{
		name: "first: every slot with an address, version 1",
		m:    m, ips: map[string]string{"cache-0": "10.0.0.1", "cache-1": "10.0.0.2", "cache-2": "10.0.0.3"},
		want: discovery.Cluster{Version: 1, Nodes: three.Nodes},
	}, {
		name: "nothing changed: the same version",
		m:    m, ips: map[string]string{"cache-0": "10.0.0.1", "cache-1": "10.0.0.2", "cache-2": "10.0.0.3"}, published: three,
		want: three,
	}, {
		name: "a pod replaced, not back yet: its slot stays, with its last address",
		m:    m, ips: map[string]string{"cache-0": "10.0.0.1", "cache-2": "10.0.0.3"}, published: three,
		want: three,
	}, {
		name: "a pod back with a new address: the next version",
		m:    m, ips: map[string]string{"cache-0": "10.0.0.1", "cache-1": "10.0.0.9", "cache-2": "10.0.0.3"}, published: three,
		want: discovery.Cluster{Version: 5, Nodes: []discovery.Node{node(0, "10.0.0.1"), node(1, "10.0.0.9"), node(2, "10.0.0.3")}},
	}, {
		name: "scaled up: a new slot appears once its pod has an address",
		m:    memcached("cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](4)}), ips: map[string]string{"cache-0": "10.0.0.1", "cache-1": "10.0.0.2", "cache-2": "10.0.0.3"}, published: three,
		want: three,
	}, {
		name: "scaled down: the slots beyond the size leave",
		m:    memcached("cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}), ips: map[string]string{"cache-0": "10.0.0.1", "cache-1": "10.0.0.2", "cache-2": "10.0.0.3"}, published: three,
		want: discovery.Cluster{Version: 5, Nodes: three.Nodes[:2]},
	}, {
		name: "a slot handing its keys off: left out, the next version",
		m:    m, ips: map[string]string{"cache-0": "10.0.0.1", "cache-1": "10.0.0.2", "cache-2": "10.0.0.3"}, published: three, leaving: SlotHost("cache", "ns", 1),
		want: discovery.Cluster{Version: 5, Nodes: []discovery.Node{node(0, "10.0.0.1"), node(2, "10.0.0.3")}},
	}, {
		name: "the same slot still handing off: the same version",
		m:    m, ips: map[string]string{"cache-0": "10.0.0.1", "cache-1": "10.0.0.2", "cache-2": "10.0.0.3"},
		published: discovery.Cluster{Version: 5, Nodes: []discovery.Node{node(0, "10.0.0.1"), node(2, "10.0.0.3")}}, leaving: SlotHost("cache", "ns", 1),
		want: discovery.Cluster{Version: 5, Nodes: []discovery.Node{node(0, "10.0.0.1"), node(2, "10.0.0.3")}},
	}, {
		name:      "a new port rolling out: each node on its own pod's port, the one not yet replaced on the old",
		m:         memcached("cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3), ContainerPort: ptr.To[int32](11311)}),
		addrs:     map[string]PodAddress{"cache-0": {IP: "10.0.0.1", Port: 11211}, "cache-1": {IP: "10.0.0.2", Port: 11211}, "cache-2": {IP: "10.0.0.7", Port: 11311}},
		published: three,
		want: discovery.Cluster{Version: 5, Nodes: []discovery.Node{node(0, "10.0.0.1"), node(1, "10.0.0.2"),
			{Host: SlotHost("cache", "ns", 2), IP: "10.0.0.7", Port: 11311}}},
	}, {
		name:  "a pod that names no port: m's",
		m:     memcached("cache", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), ContainerPort: ptr.To[int32](11311)}),
		addrs: map[string]PodAddress{"cache-0": {IP: "10.0.0.1"}},
		want:  discovery.Cluster{Version: 1, Nodes: []discovery.Node{{Host: SlotHost("cache", "ns", 0), IP: "10.0.0.1", Port: 11311}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			addrs := tc.addrs
			if addrs == nil {
				addrs = map[string]PodAddress{}
				for pod, ip := range tc.ips {
					addrs[pod] = PodAddress{IP: ip, Port: 11211}
				}
			}
			got := Membership(tc.m, addrs, tc.published, tc.leaving)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Membership (-want +got):\n%s", diff)
			}
		})
	}
}
