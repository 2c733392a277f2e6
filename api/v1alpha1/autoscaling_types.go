package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// AutoscalingSpec has the operator set spec.size itself, one slot at a
// time between minSize and maxSize, from memcached's own statistics: the
// evictions of items that were still being read, and the hit ratio. Each
// step is a change of spec.size, which the operator makes through the
// scale subresource under its own field manager
// (memcached-operator-autoscaler), as an HPA does, so it moves keys as any
// scale does. Leave spec.size out of
// the manifests you apply, as with a HorizontalPodAutoscaler: the operator
// takes spec.size from a manager that wrote it once (kubectl create, edit
// or scale), never from one that applies it (Argo CD, Flux, kubectl apply
// --server-side), and says so in the status.
//
// +kubebuilder:validation:XValidation:rule="self.maxSize >= self.minSize",fieldPath=".maxSize",message="maxSize must be at least minSize"
type AutoscalingSpec struct {
	// minSize is the fewest slots the operator scales to.
	//
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MinSize int32 `json:"minSize"`

	// maxSize is the most slots the operator scales to.
	//
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxSize int32 `json:"maxSize"`

	// readEvictionsPerMinute is the target for the evictions of items that
	// had been read since they were stored (memcached's evictions minus
	// evicted_unfetched), a minute, per slot: above it for
	// scaleUpSeconds, a slot is added. An item evicted before anyone read
	// it does not count: more memory would not have served it.
	//
	// +optional
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	ReadEvictionsPerMinute *int32 `json:"readEvictionsPerMinute,omitempty"`

	// hitRatioPercent, when set, adds a slot too while the hit ratio is
	// under it for scaleUpSeconds and items that had been read are
	// evicted (a low hit ratio without such evictions is misses on keys
	// never stored, which more memory does not serve), and keeps a slot
	// from being removed while the hit ratio is under it.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	HitRatioPercent *int32 `json:"hitRatioPercent,omitempty"`

	// maxHitRatioLossPermille is the most hit ratio, in thousandths (10 is
	// one point: 95% to 94%), that one slot fewer may lose for a slot to be
	// removed, as the operator estimates it from the reuse distances of a
	// sample of the gets (SHARDS, a miss-ratio curve): the gets an LRU
	// cache one slot smaller would no longer serve. 0 removes a slot only
	// when it would lose none.
	//
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MaxHitRatioLossPermille *int32 `json:"maxHitRatioLossPermille,omitempty"`

	// scaleUpSeconds is how long a signal must stay above its target
	// before a slot is added.
	//
	// +optional
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	ScaleUpSeconds *int32 `json:"scaleUpSeconds,omitempty"`

	// scaleDownSeconds is how long the evictions of read items must stay
	// under a quarter of their target, with every item read in that time
	// fitting in one slot fewer and the estimated loss of hit ratio within
	// maxHitRatioLossPermille, before a slot is removed. It is also the
	// time over which that working set and the gets' reuse distances are
	// counted.
	//
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=86400
	ScaleDownSeconds *int32 `json:"scaleDownSeconds,omitempty"`
}

// AutoscalingStatus tells what the operator's autoscaling decided last,
// and what it would do next. It changes when a decision does, not with
// every reading (the readings themselves are the operator's metrics).
type AutoscalingStatus struct {
	// lastScaleTime is when the operator last changed spec.size.
	//
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`

	// lastScale says the last change of spec.size the operator made, from
	// what size to what, and on what reading.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	LastScale string `json:"lastScale,omitempty"`

	// next is the step the operator would take on what it reads now:
	// Hold, ScaleUp (waiting out scaleUpSeconds), ScaleDown (waiting out
	// scaleDownSeconds) or Blocked (a step is due but cannot be taken).
	//
	// +optional
	// +kubebuilder:validation:Enum=Hold;ScaleUp;ScaleDown;Blocked
	Next string `json:"next,omitempty"`

	// reason says why next is what it is, with the readings it was
	// decided on.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
}
