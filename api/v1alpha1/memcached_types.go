package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MemcachedSpec is the desired state of a Memcached cache.
type MemcachedSpec struct {
	// size is the number of memcached pods. It is the scale subresource's
	// replica count, so `kubectl scale memcached/NAME --replicas=N` and a
	// HorizontalPodAutoscaler set it too.
	//
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Size *int32 `json:"size,omitempty"`

	// containerPort is the TCP port memcached listens on.
	//
	// +optional
	// +kubebuilder:default=11211
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ContainerPort *int32 `json:"containerPort,omitempty"`

	// image is the memcached container image. When empty, the operator's
	// default is used (its --memcached-image flag, or the MEMCACHED_IMAGE
	// environment variable).
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\\\\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$')",message="image must be a container image reference such as memcached:1.6.38 or registry.example.com/cache/memcached@sha256:<64 hex digits>"
	Image string `json:"image,omitempty"`

	// memoryLimitMiB is the memory memcached may use for items, in MiB
	// (memcached's -m). When empty, memcached's own default (64) applies.
	// Keep it below resources.limits.memory, with room for connections
	// and memcached's own overhead, or the container is killed when full.
	//
	// +optional
	// +kubebuilder:validation:Minimum=8
	// +kubebuilder:validation:Maximum=65536
	MemoryLimitMiB *int32 `json:"memoryLimitMiB,omitempty"`

	// maxConnections is the maximum number of simultaneous connections
	// (memcached's -c). When empty, memcached's own default (1024) applies.
	//
	// +optional
	// +kubebuilder:validation:Minimum=16
	// +kubebuilder:validation:Maximum=65536
	MaxConnections *int32 `json:"maxConnections,omitempty"`

	// threads is the number of worker threads (memcached's -t). When empty,
	// memcached's own default (4) applies.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Threads *int32 `json:"threads,omitempty"`

	// resources are the memcached container's compute resources. When
	// empty, the container has no requests or limits.
	//
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// nodeSelector is copied as-is to the memcached pods: they run only on
	// nodes with these labels.
	//
	// +optional
	// +mapType=atomic
	// +kubebuilder:validation:MaxProperties=32
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// affinity is copied as-is to the memcached pods.
	//
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// tolerations are copied as-is to the memcached pods.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// topologySpreadConstraints replace the operator's default spreading
	// when set. By default the pods of a Memcached are spread across nodes
	// (topologyKey kubernetes.io/hostname, maxSkew 1, ScheduleAnyway, pods
	// of the current revision only), so
	// that losing a node loses as little of the cache as the scheduler can
	// manage.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
}

// MemcachedStatus is the observed state of a Memcached cache, rebuilt by the
// operator from the cluster on every reconcile.
type MemcachedStatus struct {
	// conditions tell whether the cache is working: Available, Progressing,
	// Degraded, and the kstatus conditions Reconciling and Stalled that
	// GitOps tools read. Other controllers may add conditions of their own
	// types; the operator leaves them alone.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the metadata.generation this status was computed for.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// replicas is the number of memcached pods that exist (the scale
	// subresource's status replica count).
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of memcached pods that are ready.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// selector is the label selector of the memcached pods, in string form
	// (the scale subresource's selector, used by a HorizontalPodAutoscaler).
	//
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Selector string `json:"selector,omitempty"`

	// service tells clients where to connect: the headless Service that
	// resolves to one address per ready memcached pod. It is set once the
	// operator has applied the Service.
	//
	// +optional
	Service *ServiceStatus `json:"service,omitempty"`
}

// ServiceStatus names the Service clients connect through.
type ServiceStatus struct {
	// name is the Service's name, the Memcached's own.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// port is the memcached port, named "memcached" on the Service.
	//
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// address is "<name>.<namespace>.svc:<port>": a client in the cluster
	// resolves the host to the address of every ready memcached pod.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Address string `json:"address"`
}

// Memcached runs a memcached cache as a Deployment.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=mc,categories=all
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.size,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].reason`,priority=1
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,priority=1
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.service.address`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be at most 63 characters: it is used as a label value and a DNS label"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must start with a lowercase letter and hold only lowercase letters, digits and '-' (no dots): it names the Memcached's Service, so it must be a DNS-1035 label"
type Memcached struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's metadata.
	//
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the cache.
	//
	// +optional
	Spec MemcachedSpec `json:"spec,omitempty"`

	// status is the observed state of the cache, written by the operator.
	//
	// +optional
	Status MemcachedStatus `json:"status,omitempty"`
}

// MemcachedList is a list of Memcached.
//
// +kubebuilder:object:root=true
type MemcachedList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's metadata.
	//
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the Memcached objects.
	Items []Memcached `json:"items"`
}
