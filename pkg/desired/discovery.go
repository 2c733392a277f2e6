package desired

import (
	"cmp"
	"path"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/autoscale"
	"github.com/example/memcached-operator/pkg/discovery"
)

const (
	// DiscoveryContainerName is the container that serves the Memcached's
	// membership in each pod (cmd/discovery), on DiscoveryPort, named
	// DiscoveryPortName.
	DiscoveryContainerName       = "discovery"
	DiscoveryPortName            = "discovery"
	DiscoveryPort          int32 = 11212
	// MembershipKey is the key of the membership ConfigMap that holds the
	// cluster's answer (discovery.Cluster.Body).
	MembershipKey = "cluster"
	// MoveKey is the key of the membership ConfigMap that holds the move
	// of keys under way (move.Plan), if any.
	MoveKey = "move"
	// MembershipSuffix makes the membership ConfigMap's name from the
	// Memcached's: "<name>-membership".
	MembershipSuffix = "-membership"

	membershipVolume = "membership"
	membershipDir    = "/etc/memcached/membership"
	discoveryCommand = "/discovery"
	// The discovery container's resources: it reads a small file per
	// request and otherwise sleeps.
	discoveryCPURequest = "5m"
	discoveryMemory     = "32Mi"
	// discoveryUser is the operator image's user (distroless nonroot).
	discoveryUser = 65532
)

// RunsDiscovery tells whether m's pods serve the discovery endpoint: with
// the operator's image (images.Reloader).
func RunsDiscovery(m *cachev1alpha1.Memcached, images Images) bool {
	return images.Reloader != ""
}

// MovesKeys tells whether m's pods move keys when its size changes
// (spec.keyMoves), which they do through the discovery container.
func MovesKeys(m *cachev1alpha1.Memcached) bool {
	return m.Spec.KeyMoves != nil
}

// Autoscales tells whether the operator sets m's size from its
// memcached's statistics (spec.autoscaling), which m's discovery
// containers serve on autoscale.SignalsPort.
func Autoscales(m *cachev1alpha1.Memcached) bool {
	return m.Spec.Autoscaling != nil && MovesKeys(m)
}

// ClientPoll is how long m's clients take to poll a new membership
// (spec.keyMoves.clientPollSeconds, 60 s when unset as the CRD defaults
// it).
func ClientPoll(m *cachev1alpha1.Memcached) time.Duration {
	if m.Spec.KeyMoves == nil || m.Spec.KeyMoves.ClientPollSeconds == nil {
		return 60 * time.Second
	}
	return time.Duration(*m.Spec.KeyMoves.ClientPollSeconds) * time.Second
}

// MembershipName is the name of the membership ConfigMap of the Memcached
// name.
func MembershipName(name string) string { return name + MembershipSuffix }

// DiscoveryAddress is where a client's auto discovery finds m's
// membership: any ready pod of m, through its headless Service, on
// DiscoveryPort.
func DiscoveryAddress(m *cachev1alpha1.Memcached) string {
	return ServiceHost(m.Name, m.Namespace) + ":" + strconv.Itoa(int(DiscoveryPort))
}

// PodAddress is where a pod's memcached serves clients: the pod's address
// and its container port named PortName.
type PodAddress struct {
	IP   string
	Port int32
}

// Membership is the cluster m's discovery endpoint serves: each of m's
// slots in slot order, named by its stable DNS name (SlotHost), with the
// address and port its pod has (addrs, by pod name) or, while the pod
// restarts or is replaced, the ones the published membership lists for it,
// so that a client keeps the slot's keys where they are; a slot whose pod
// never had an address in addrs (a new one, on a scale-up) is left out
// until it has one. Each node has its own pod's port, so that while a new
// spec.containerPort rolls out, the pods not yet replaced are reached where
// they still serve; a pod that names no port is taken to serve on m's. The
// controller passes the ready pods' addresses only, so that clients reach a
// pod once memcached serves there. The slots named leaving (their host
// names), whose keys are handed to the others before their memcached loses
// them, are left out. The version is the published one's, and one more
// when the nodes differ.
func Membership(m *cachev1alpha1.Memcached, addrs map[string]PodAddress, published discovery.Cluster, leaving ...string) discovery.Cluster {
	last := map[string]discovery.Node{}
	for _, n := range published.Nodes {
		last[n.Host] = n
	}
	c := discovery.Cluster{Version: max(published.Version, 1)}
	for k := range int(Replicas(m)) {
		host := SlotHost(m.Name, m.Namespace, k)
		node, ok := last[host]
		if a := addrs[m.Name+"-"+strconv.Itoa(k)]; a.IP != "" {
			node, ok = discovery.Node{Host: host, IP: a.IP, Port: cmp.Or(a.Port, port(m))}, true
		}
		if !ok || slices.Contains(leaving, host) {
			continue
		}
		c.Nodes = append(c.Nodes, node)
	}
	if published.Version > 0 && !slices.Equal(c.Nodes, published.Nodes) {
		c.Version = published.Version + 1
	}
	return c
}

// MembershipConfigMap is m's membership ConfigMap, holding c, which every
// pod of m mounts for its discovery container.
// With a move of keys under way, it holds the move's plan too (MoveKey).
func MembershipConfigMap(m *cachev1alpha1.Memcached, c discovery.Cluster, plan string) *corev1ac.ConfigMapApplyConfiguration {
	data := map[string]string{MembershipKey: string(c.Body())}
	if plan != "" {
		data[MoveKey] = plan
	}
	return corev1ac.ConfigMap(MembershipName(m.Name), m.Namespace).
		WithLabels(Labels(m)).
		WithOwnerReferences(ownerReference(m)).
		WithData(data)
}

// discoveryContainer serves m's membership on DiscoveryPort, from the
// mounted membership ConfigMap, and hands data connections to memcached
// over the pod's loopback. It makes no request to the apiserver. With TLS
// it serves memcached's certificate from the served directory (the files
// the reloader checked), asks clients what memcached asks, and reaches
// memcached over TLS, presenting that certificate when memcached verifies
// clients; with authentication it asks a login first, which memcached
// judges.
func discoveryContainer(m *cachev1alpha1.Memcached, images Images) *corev1ac.ContainerApplyConfiguration {
	args := []string{
		"--listen=:" + strconv.Itoa(int(DiscoveryPort)),
		"--membership=" + membershipDir + "/" + MembershipKey,
		"--seal=" + membershipDir + "/" + discovery.SealFile,
		"--memcached-address=localhost:" + strconv.Itoa(int(port(m))),
	}
	if m.Spec.TLS != nil {
		args = append(args, "--tls-dir="+servedDir)
		if verifiesClients(m) {
			args = append(args, "--client-certificate")
		}
	}
	if m.Spec.Auth != nil {
		args = append(args, "--auth")
	}
	if MovesKeys(m) {
		args = append(args, "--plan="+membershipDir+"/"+MoveKey)
		if m.Spec.Auth != nil {
			args = append(args, "--auth-file="+path.Join(servedDir, authFile))
		}
		// Only when set: the pods made before the field keep their shape.
		if m.Spec.KeyMoves.KeysPerSecond != nil {
			args = append(args, "--move-rate="+strconv.FormatInt(MoveRate(m), 10))
		}
		if HandsOffOnDeletion(m, images) {
			args = append(args, handOffArgs(m)...)
		}
	}
	ports := []*corev1ac.ContainerPortApplyConfiguration{corev1ac.ContainerPort().
		WithName(DiscoveryPortName).WithContainerPort(DiscoveryPort).WithProtocol(corev1.ProtocolTCP)}
	if Autoscales(m) {
		args = append(args, "--signals-listen=:"+strconv.Itoa(int(autoscale.SignalsPort)))
		ports = append(ports, corev1ac.ContainerPort().
			WithName(autoscale.SignalsPortName).WithContainerPort(autoscale.SignalsPort).WithProtocol(corev1.ProtocolTCP))
	}
	c := corev1ac.Container().
		WithName(DiscoveryContainerName).
		WithImage(images.Reloader).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		WithCommand(discoveryCommand).
		WithArgs(args...).
		WithPorts(ports...).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(discoveryCPURequest),
				corev1.ResourceMemory: resource.MustParse(discoveryMemory),
			}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(discoveryMemory)})).
		WithSecurityContext(restricted(discoveryUser)).
		WithVolumeMounts(mount(membershipVolume, membershipDir))
	if HandsOffOnDeletion(m, images) {
		c.WithVolumeMounts(handOffMount()).WithLifecycle(corev1ac.Lifecycle().WithPreStop(discoveryPreStop()))
	}
	if m.Spec.TLS != nil || (MovesKeys(m) && m.Spec.Auth != nil) {
		// Read through the pod's fsGroup, as memcached reads them.
		c.WithVolumeMounts(mount(servedVolume, servedDir))
	}
	return c
}

// membershipVolumeOf mounts the keys of m's membership ConfigMap the
// discovery container reads (optional, so that pods start before it is
// made) and, beside them, the pod's AnnotationMembershipSeal: in one
// projected volume, which the kubelet writes whole, so that the seal and
// what it vouches for change together.
func membershipVolumeOf(m *cachev1alpha1.Memcached) *corev1ac.VolumeApplyConfiguration {
	cm := corev1ac.ConfigMapProjection().
		WithName(MembershipName(m.Name)).
		WithOptional(true).
		WithItems(corev1ac.KeyToPath().WithKey(MembershipKey).WithPath(MembershipKey))
	if MovesKeys(m) {
		cm.WithItems(corev1ac.KeyToPath().WithKey(MoveKey).WithPath(MoveKey))
	}
	return corev1ac.Volume().WithName(membershipVolume).WithProjected(corev1ac.ProjectedVolumeSource().
		WithSources(
			corev1ac.VolumeProjection().WithConfigMap(cm),
			corev1ac.VolumeProjection().WithDownwardAPI(corev1ac.DownwardAPIProjection().
				WithItems(corev1ac.DownwardAPIVolumeFile().
					WithPath(discovery.SealFile).
					WithFieldRef(corev1ac.ObjectFieldSelector().WithAPIVersion("v1").
						WithFieldPath("metadata.annotations['"+AnnotationMembershipSeal+"']"))))))
}
