package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxSize is the largest size a Memcached may have: spec.size's Maximum
// in the CRD, which the operator holds its StatefulSet to as well
// (TestTheCRDBoundsTheSizeAtMaxSize).
const MaxSize = 100

// MemcachedSpec is the desired state of a Memcached cache.
//
// The rules below refuse, when the Memcached is applied, what the apiserver
// or memcached would otherwise refuse later in the objects built from it.
//
// +kubebuilder:validation:XValidation:rule="!has(self.maxItemSize) || (quantity(self.maxItemSize).compareTo(quantity('1Gi')) <= 0 && quantity(self.maxItemSize).asInteger() <= (has(self.memoryLimitMiB) ? self.memoryLimitMiB : 64) * 524288)",fieldPath=".maxItemSize",reason="FieldValueInvalid",message="maxItemSize must be at most half of memoryLimitMiB (64 MiB when unset): memcached refuses a larger item size"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || has(self.keyMoves)",fieldPath=".autoscaling",reason="FieldValueForbidden",message="autoscaling needs keyMoves: each step it takes moves keys, and without keyMoves a scale loses them"
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !has(self.monitoring) || !self.monitoring.enabled",fieldPath=".auth",reason="FieldValueForbidden",message="auth and monitoring cannot be on together: the exporter cannot authenticate to memcached"
// +kubebuilder:validation:XValidation:rule="!has(self.monitoring) || !self.monitoring.enabled || !has(self.containerPort) || self.containerPort != 9150",fieldPath=".containerPort",reason="FieldValueForbidden",message="containerPort must not be 9150 while monitoring is on: the exporter listens on it in the same pod"
// +kubebuilder:validation:XValidation:rule="!has(self.podAnnotations) || !self.podAnnotations.exists(k, k.startsWith('cache.example.com/'))",fieldPath=".podAnnotations",reason="FieldValueForbidden",message="podAnnotations must not set keys under cache.example.com/: the operator sets them"
// +kubebuilder:validation:XValidation:rule="!has(self.podLabels) || !self.podLabels.exists(k, k in ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/managed-by', 'cache.example.com/memcached', 'controller-revision-hash', 'statefulset.kubernetes.io/pod-name', 'apps.kubernetes.io/pod-index'])",fieldPath=".podLabels",reason="FieldValueForbidden",message="podLabels must not set app.kubernetes.io/name, app.kubernetes.io/instance, app.kubernetes.io/managed-by, cache.example.com/memcached or the StatefulSet controller's labels (controller-revision-hash, statefulset.kubernetes.io/pod-name, apps.kubernetes.io/pod-index): the operator and the StatefulSet controller set them to select the pods"
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

	// maxItemSize is the largest item memcached stores (memcached's -I),
	// in Ki, Mi or Gi, such as 2Mi. When empty, memcached's own
	// default (1Mi) applies. memcached accepts multiples of 512Ki from
	// 512Ki to 1Gi, and at most half of memoryLimitMiB.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(self).compareTo(quantity('512Ki')) >= 0 && quantity(self).compareTo(quantity('1Gi')) <= 0 && quantity(self).asInteger() % 524288 == 0",message="maxItemSize must be a multiple of 512Ki between 512Ki and 1Gi, such as 512Ki, 1Mi or 4Mi"
	// +kubebuilder:validation:MaxLength=12
	// +kubebuilder:validation:Pattern=`^[0-9]+(Ki|Mi|Gi)$`
	MaxItemSize string `json:"maxItemSize,omitempty"`

	// verbosity is memcached's logging level: 0 logs errors only, 1
	// (memcached's -v) adds client errors and warnings, 2 (-vv) adds every
	// command and response. Level 2 logs keys; use it only to debug.
	//
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2
	Verbosity *int32 `json:"verbosity,omitempty"`

	// imagePullSecrets name Secrets in the Memcached's namespace that the
	// kubelet uses to pull the memcached and exporter images.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	ImagePullSecrets []ImagePullSecret `json:"imagePullSecrets,omitempty"`

	// priorityClassName is the PriorityClass of the memcached pods. The
	// class must exist when the pods are created, or the StatefulSet cannot
	// create them (the status says so).
	//
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// podLabels are added to the memcached pods' labels. They cannot set
	// the labels that select the pods.
	//
	// +optional
	// +mapType=atomic
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="podLabels keys must be label keys: an optional DNS subdomain prefix and '/', then a name of at most 63 letters, digits, '-', '_' or '.'"
	PodLabels map[string]LabelValue `json:"podLabels,omitempty"`

	// podAnnotations are added to the memcached pods' annotations.
	// Changing them rolls the pods.
	//
	// +optional
	// +mapType=atomic
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="podAnnotations keys must be annotation keys: an optional DNS subdomain prefix and '/', then a name of at most 63 letters, digits, '-', '_' or '.'"
	PodAnnotations map[string]AnnotationValue `json:"podAnnotations,omitempty"`

	// monitoring runs the Prometheus memcached exporter beside memcached
	// and, when the cluster has the Prometheus Operator, a ServiceMonitor
	// that scrapes it. Off when empty.
	//
	// +optional
	Monitoring *MonitoringSpec `json:"monitoring,omitempty"`

	// tls makes memcached serve TLS only, with the certificate and key of
	// a Secret, and optionally verify client certificates. Off when empty.
	// A change of the Secret's content rolls the pods, one at a time.
	//
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// auth makes memcached require a user name and password from every
	// client (memcached's ASCII authentication, -Y), from a Secret. Off
	// when empty. A change of the Secret's content rolls the pods, one at
	// a time. The exporter cannot authenticate, so auth and monitoring
	// cannot be on together.
	//
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// networkPolicy, when enabled, makes a NetworkPolicy named after the
	// Memcached that lets only the clients it names reach memcached's port
	// and only the metrics clients it names reach the exporter's; nothing
	// else reaches the pods. It takes effect where the cluster's network
	// plugin enforces NetworkPolicies. Off when empty.
	//
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// resources are the memcached container's compute resources. When
	// empty, the container has no requests or limits.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.claims) || size(self.claims) == 0",message="claims cannot be used: the memcached pods claim no dynamic resources"
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// nodeSelector is copied as-is to the memcached pods: they run only on
	// nodes with these labels.
	//
	// +optional
	// +mapType=atomic
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="nodeSelector keys must be label keys"
	NodeSelector map[string]LabelValue `json:"nodeSelector,omitempty"`

	// affinity is copied as-is to the memcached pods.
	//
	// +optional
	Affinity *Affinity `json:"affinity,omitempty"`

	// tolerations are copied as-is to the memcached pods.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Tolerations []Toleration `json:"tolerations,omitempty"`

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
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.topologyKey == a.topologyKey && b.whenUnsatisfiable == a.whenUnsatisfiable))",message="each pair of topologyKey and whenUnsatisfiable may appear once"
	TopologySpreadConstraints []TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// keyMoves, when set, moves keys when the size changes, for clients
	// that find the slots through the discovery endpoint and hash keys
	// over them with the ring named here: before a new slot is published,
	// and before a leaving slot is, its keys are copied to the slots the
	// new membership gives them, and removed from the old ones once the
	// clients have polled the new membership. A leaving slot's pod is
	// removed only then. When empty, a change of size moves no key: the
	// keys the ring gives another slot are lost.
	//
	// +optional
	KeyMoves *KeyMovesSpec `json:"keyMoves,omitempty"`

	// autoscaling, when set, has the operator set size itself from
	// memcached's own statistics (see AutoscalingSpec). It needs keyMoves:
	// each step moves keys.
	//
	// +optional
	Autoscaling *AutoscalingSpec `json:"autoscaling,omitempty"`
}

// KeyMovesSpec says how the clients of a Memcached hash keys over its
// slots, and how soon they follow a new membership.
type KeyMovesSpec struct {
	// ring is the clients' consistent hash over the slots' host names
	// (host:port when the port is not 11211): "libmemcached" for
	// libmemcached's weighted ketama (pylibmc's ketama_weighted,
	// php-memcached's libketama compatibility), "node" for the Node client
	// memcached 2.x's ketama (memcached-elasticache's).
	//
	// +required
	// +kubebuilder:validation:Enum=libmemcached;node
	Ring string `json:"ring"`

	// clientPollSeconds is how often the clients ask the discovery
	// endpoint for the membership: once a new membership is published,
	// the keys it moved stay on their old slots, and a leaving slot's pod
	// runs, this long before they are removed.
	//
	// +optional
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	ClientPollSeconds *int32 `json:"clientPollSeconds,omitempty"`

	// keysPerSecond bounds how many keys each pod's mover reads and
	// writes a second, on a scale and on a hand-off (20000 when unset):
	// higher hands a slot's keys over sooner, and so shortens the pods'
	// termination grace period, which is sized for a hand-off of as many
	// items as memcached holds at this rate; lower leaves more of the pod's
	// CPU to the clients while keys move. Changing it replaces the pods,
	// each handing its keys over.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1000
	// +kubebuilder:validation:Maximum=1000000
	KeysPerSecond *int32 `json:"keysPerSecond,omitempty"`
}

// AnnotationValue is the value of an annotation the operator puts on pods.
//
// +kubebuilder:validation:MaxLength=4096
type AnnotationValue string

// ImagePullSecret names a Secret of type kubernetes.io/dockerconfigjson in
// the Memcached's namespace.
type ImagePullSecret struct {
	// name is the Secret's name.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// TLSSpec configures memcached's TLS.
type TLSSpec struct {
	// secretName names a Secret in the Memcached's namespace with the keys
	// of a kubernetes.io/tls Secret, as cert-manager writes them: tls.crt
	// (the certificate chain memcached presents), tls.key (its private
	// key) and, when clientCertificates is Request or Require, ca.crt (the
	// certificates of the CAs that client certificates must chain to).
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	SecretName string `json:"secretName"`

	// clientCertificates is what memcached asks of clients' certificates:
	// None (the default) asks for none; Request asks for one and refuses
	// a connection whose certificate does not chain to ca.crt, but
	// accepts one without; Require refuses a connection without a
	// certificate that chains to ca.crt.
	//
	// +optional
	// +kubebuilder:default=None
	ClientCertificates ClientCertificates `json:"clientCertificates,omitempty"`
}

// ClientCertificates is what memcached asks of clients' certificates.
//
// +kubebuilder:validation:Enum=None;Request;Require
type ClientCertificates string

// The values of ClientCertificates.
const (
	ClientCertificatesNone    ClientCertificates = "None"
	ClientCertificatesRequest ClientCertificates = "Request"
	ClientCertificatesRequire ClientCertificates = "Require"
)

// AuthSpec configures memcached's authentication.
type AuthSpec struct {
	// secretName names a Secret in the Memcached's namespace that holds
	// memcached's authentication file under key: one user:password per
	// line. A client authenticates by sending, before any other command,
	// "set <any key> 0 0 <length>" with "<user> <password>" as the value.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	SecretName string `json:"secretName"`

	// key is the Secret's key that holds the authentication file.
	//
	// +optional
	// +kubebuilder:default=authfile
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && !self.startsWith('..')",message="key must not be '.' nor start with '..'"
	Key string `json:"key,omitempty"`
}

// MonitoringSpec configures the metrics of a Memcached.
type MonitoringSpec struct {
	// enabled runs the exporter: a container named "exporter" in every
	// memcached pod, serving Prometheus metrics on the port named
	// "metrics" (9150), which the Service exposes too. Turning it off
	// removes the container, the port and the ServiceMonitor.
	//
	// +required
	Enabled bool `json:"enabled"`

	// interval is how often Prometheus scrapes the exporter, as a
	// Prometheus duration such as 30s or 1m. When empty, Prometheus's own
	// scrape interval applies.
	//
	// +optional
	// +kubebuilder:validation:Pattern=`^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`
	// +kubebuilder:validation:MaxLength=32
	Interval string `json:"interval,omitempty"`

	// serviceMonitorLabels are the ServiceMonitor's labels beyond the
	// operator's own: what a Prometheus's serviceMonitorSelector selects
	// on, such as release: prometheus.
	//
	// +optional
	// +mapType=atomic
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && !(k in ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/managed-by']))",message="serviceMonitorLabels keys must be label keys other than the operator's own app.kubernetes.io/name, instance and managed-by"
	ServiceMonitorLabels map[string]LabelValue `json:"serviceMonitorLabels,omitempty"`

	// resources are the exporter container's compute resources. When
	// empty, it has no requests or limits.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.claims) || size(self.claims) == 0",message="claims cannot be used: the memcached pods claim no dynamic resources"
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// NetworkPolicySpec configures the NetworkPolicy of a Memcached.
type NetworkPolicySpec struct {
	// enabled makes the NetworkPolicy. Turning it off deletes it: the
	// pods are then reached as before (other NetworkPolicies that select
	// them still apply).
	//
	// +required
	Enabled bool `json:"enabled"`

	// clients are the pods that may connect to memcached's port. When
	// empty, every pod of the Memcached's namespace may.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Clients []NetworkPolicyPeer `json:"clients,omitempty"`

	// metricsClients are the pods that may connect to the exporter's port
	// while monitoring is enabled. When empty, every pod of the namespaces
	// labelled cache.example.com/metrics: enabled may: the label the
	// operator's own metrics NetworkPolicy admits; give it to the namespace
	// Prometheus runs in.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	MetricsClients []NetworkPolicyPeer `json:"metricsClients,omitempty"`
}

// NetworkPolicyPeer selects pods as a NetworkPolicy's peer does: with
// podSelector only, the pods it selects in the Memcached's namespace; with
// namespaceSelector only, every pod of the namespaces it selects; with
// both, the pods podSelector selects in those namespaces. An empty
// selector ({}) selects all.
//
// +kubebuilder:validation:XValidation:rule="has(self.podSelector) || has(self.namespaceSelector)",message="set podSelector, namespaceSelector or both: {} selects every pod or every namespace"
type NetworkPolicyPeer struct {
	// podSelector selects the pods that may connect.
	//
	// +optional
	PodSelector *LabelSelector `json:"podSelector,omitempty"`

	// namespaceSelector selects the namespaces whose pods may connect.
	//
	// +optional
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`
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

	// observedGeneration is the metadata.generation this status was computed
	// for; 0 until the operator first writes the status, so that a Memcached
	// nothing has looked at yet reads as in progress, never as current.
	//
	// +optional
	// +kubebuilder:default=0
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

	// image is the memcached image the operator gives the pods: spec.image,
	// or the operator's default when that is unset.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// service tells clients where to connect: the headless Service that
	// resolves to one address per ready memcached pod. It is set once the
	// operator has applied the Service.
	//
	// +optional
	Service *ServiceStatus `json:"service,omitempty"`

	// discovery tells clients with auto discovery (AWS ElastiCache's
	// "config get cluster") where to find every slot of the cache. It is
	// set while the pods serve the endpoint and its membership is
	// published.
	//
	// +optional
	Discovery *DiscoveryStatus `json:"discovery,omitempty"`

	// tls tells about memcached's certificate (spec.tls), while the
	// Secret holds one valid now for the Service's name.
	//
	// +optional
	TLS *TLSStatus `json:"tls,omitempty"`

	// autoscaling tells what spec.autoscaling decided last and would do
	// next; set while spec.autoscaling is.
	//
	// +optional
	Autoscaling *AutoscalingStatus `json:"autoscaling,omitempty"`
}

// TLSStatus tells about the certificate memcached serves: the Secret's,
// which the pods load within about a minute of its change.
type TLSStatus struct {
	// notAfter is when the certificate expires.
	//
	// +required
	NotAfter metav1.Time `json:"notAfter"`

	// expiresSoon is true within 7 days of notAfter, or a sixth of the
	// certificate's lifetime when that is shorter: it should have been
	// renewed by then (cert-manager renews a third of the lifetime ahead).
	// A Warning event CertificateExpiring says so when it turns true.
	//
	// +optional
	ExpiresSoon bool `json:"expiresSoon,omitempty"`
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

// DiscoveryStatus is where the discovery endpoint answers.
type DiscoveryStatus struct {
	// address is "<name>.<namespace>.svc:11212": any ready pod of the
	// Memcached answers "config get cluster" there with every slot's
	// name, address and port, and serves memcached's commands.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Address string `json:"address"`
}

// Memcached runs a memcached cache as a StatefulSet: one slot per pod, each
// with a stable name.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=mc,categories=all
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.size,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].reason`,priority=1
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.status.image`,priority=1
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.service.address`,priority=1
// +kubebuilder:printcolumn:name="Discovery",type=string,JSONPath=`.status.discovery.address`,priority=1
// +kubebuilder:printcolumn:name="Autoscaling",type=string,JSONPath=`.status.autoscaling.next`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
//
// The name rules hold on creation only (names never change): a Memcached
// stored before this CRD replaced another one's stays writable, and the
// operator reports what cannot be made for it.
//
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || size(self.metadata.name) <= 63",optionalOldSelf=true,message="metadata.name must be at most 63 characters: it is used as a label value and a DNS label"
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",optionalOldSelf=true,message="metadata.name must start with a lowercase letter and hold only lowercase letters, digits and '-' (no dots): it names the Memcached's Service, so it must be a DNS-1035 label"
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
	// Until then it reads as observedGeneration 0.
	//
	// +optional
	// +kubebuilder:default={}
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
