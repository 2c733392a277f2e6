package v1alpha1

// The types below are the core API's scheduling types (Toleration,
// TopologySpreadConstraint, Affinity and what they hold), field for field,
// with the same JSON: manifests written for a pod's spec fit here unchanged,
// and the operator copies them into the pod template as they are. They exist
// to carry the apiserver's pod validation into the Memcached's schema
// (enumerations, formats, bounds and the rules between fields), so that a
// Memcached whose pods the apiserver would refuse is refused when it is
// applied, with a message naming the field, instead of being admitted and
// then failing forever. The bounds on lengths and counts also keep the CEL
// rules within the apiserver's cost budget.

// LabelKey is a Kubernetes label key: an optional DNS subdomain prefix of at
// most 253 characters and a '/', then a name of at most 63 letters, digits,
// '-', '_' or '.', starting and ending with a letter or digit.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=317
// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
// +kubebuilder:validation:XValidation:rule="self.indexOf('/') <= 253",message="a label key's prefix must be at most 253 characters"
type LabelKey string

// LabelValue is a Kubernetes label value: empty, or at most 63 letters,
// digits, '-', '_' or '.', starting and ending with a letter or digit.
//
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`
type LabelValue string

// Toleration is the core API's Toleration.
//
// +kubebuilder:validation:XValidation:rule="(has(self.key) && size(self.key) > 0) || (has(self.operator) && self.operator == 'Exists')",message="key may be empty only with operator Exists, which tolerates every taint"
// +kubebuilder:validation:XValidation:rule="!has(self.operator) || self.operator != 'Exists' || !has(self.value) || size(self.value) == 0",message="value must be empty with operator Exists"
// +kubebuilder:validation:XValidation:rule="!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",message="tolerationSeconds needs effect NoExecute"
type Toleration struct {
	// key is the taint key the toleration applies to; empty with operator
	// Exists to tolerate every taint.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^(([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`
	Key string `json:"key,omitempty"`

	// operator is Equal (the default: the taint's value must equal value)
	// or Exists (any value).
	//
	// +optional
	// +kubebuilder:validation:Pattern=`^(Equal|Exists)?$`
	Operator string `json:"operator,omitempty"`

	// value is the taint value to match with operator Equal.
	//
	// +optional
	Value LabelValue `json:"value,omitempty"`

	// effect is the taint effect to match: NoSchedule, PreferNoSchedule or
	// NoExecute; empty matches all.
	//
	// +optional
	// +kubebuilder:validation:Pattern=`^(NoSchedule|PreferNoSchedule|NoExecute)?$`
	Effect string `json:"effect,omitempty"`

	// tolerationSeconds is how long a pod stays bound to a node tainted
	// NoExecute; unset: forever.
	//
	// +optional
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// LabelSelector is the core API's label selector.
//
// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="matchLabels keys must be label keys"
type LabelSelector struct {
	// matchLabels select objects with each of these labels.
	//
	// +optional
	// +mapType=atomic
	// +kubebuilder:validation:MaxProperties=8
	MatchLabels map[string]LabelValue `json:"matchLabels,omitempty"`

	// matchExpressions select objects matching each of these requirements.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorRequirement is the core API's label selector requirement.
//
// +kubebuilder:validation:XValidation:rule="self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) : (!has(self.values) || size(self.values) == 0)",message="values must be set with operator In or NotIn, and empty with Exists or DoesNotExist"
type LabelSelectorRequirement struct {
	// key is the label key the requirement applies to.
	//
	// +required
	Key LabelKey `json:"key"`

	// operator is In, NotIn, Exists or DoesNotExist.
	//
	// +required
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator string `json:"operator"`

	// values are the label values of In and NotIn.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Values []LabelValue `json:"values,omitempty"`
}

// TopologySpreadConstraint is the core API's TopologySpreadConstraint.
//
// +kubebuilder:validation:XValidation:rule="!has(self.minDomains) || self.whenUnsatisfiable == 'DoNotSchedule'",message="minDomains needs whenUnsatisfiable DoNotSchedule"
// +kubebuilder:validation:XValidation:rule="!has(self.matchLabelKeys) || size(self.matchLabelKeys) == 0 || has(self.labelSelector)",message="matchLabelKeys needs a labelSelector"
// +kubebuilder:validation:XValidation:rule="!has(self.matchLabelKeys) || !has(self.labelSelector) || self.matchLabelKeys.all(k, !(has(self.labelSelector.matchLabels) && k in self.labelSelector.matchLabels) && !(has(self.labelSelector.matchExpressions) && self.labelSelector.matchExpressions.exists(e, e.key == k)))",message="a key of matchLabelKeys must not be in labelSelector too"
type TopologySpreadConstraint struct {
	// maxSkew is the largest difference allowed between the number of
	// matching pods in any two topology domains.
	//
	// +required
	// +kubebuilder:validation:Minimum=1
	MaxSkew int32 `json:"maxSkew"`

	// topologyKey is the node label whose values are the domains.
	//
	// +required
	TopologyKey LabelKey `json:"topologyKey"`

	// whenUnsatisfiable is DoNotSchedule or ScheduleAnyway.
	//
	// +required
	// +kubebuilder:validation:Enum=DoNotSchedule;ScheduleAnyway
	WhenUnsatisfiable string `json:"whenUnsatisfiable"`

	// labelSelector finds the pods counted in each domain.
	//
	// +optional
	LabelSelector *LabelSelector `json:"labelSelector,omitempty"`

	// minDomains is the minimum number of eligible domains.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinDomains *int32 `json:"minDomains,omitempty"`

	// nodeAffinityPolicy is Honor or Ignore.
	//
	// +optional
	// +kubebuilder:validation:Enum=Honor;Ignore
	NodeAffinityPolicy *string `json:"nodeAffinityPolicy,omitempty"`

	// nodeTaintsPolicy is Honor or Ignore.
	//
	// +optional
	// +kubebuilder:validation:Enum=Honor;Ignore
	NodeTaintsPolicy *string `json:"nodeTaintsPolicy,omitempty"`

	// matchLabelKeys are pod label keys whose values narrow the selector.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	MatchLabelKeys []LabelKey `json:"matchLabelKeys,omitempty"`
}

// Affinity is the core API's Affinity.
type Affinity struct {
	// nodeAffinity: the nodes the pods may or prefer to run on.
	//
	// +optional
	NodeAffinity *NodeAffinity `json:"nodeAffinity,omitempty"`

	// podAffinity: pods the memcached pods run near.
	//
	// +optional
	PodAffinity *PodAffinity `json:"podAffinity,omitempty"`

	// podAntiAffinity: pods the memcached pods run away from.
	//
	// +optional
	PodAntiAffinity *PodAffinity `json:"podAntiAffinity,omitempty"`
}

// NodeAffinity is the core API's NodeAffinity.
type NodeAffinity struct {
	// requiredDuringSchedulingIgnoredDuringExecution: the pods run only on
	// nodes matching one of its terms.
	//
	// +optional
	Required *NodeSelector `json:"requiredDuringSchedulingIgnoredDuringExecution,omitempty"`

	// preferredDuringSchedulingIgnoredDuringExecution: weighted preferences.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Preferred []PreferredSchedulingTerm `json:"preferredDuringSchedulingIgnoredDuringExecution,omitempty"`
}

// NodeSelector is the core API's NodeSelector.
//
// +kubebuilder:validation:XValidation:rule="self.nodeSelectorTerms.all(t, !has(t.matchExpressions) || t.matchExpressions.all(e, !has(e.values) || e.values.all(v, size(v) <= 63 && v.matches('^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$'))))",message="the values of required node affinity expressions must be label values"
type NodeSelector struct {
	// nodeSelectorTerms: a node matching any of them is eligible.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	NodeSelectorTerms []NodeSelectorTerm `json:"nodeSelectorTerms"`
}

// NodeSelectorTerm is the core API's NodeSelectorTerm.
//
// +kubebuilder:validation:XValidation:rule="!has(self.matchFields) || self.matchFields.all(f, f.key == 'metadata.name' && f.operator in ['In', 'NotIn'] && has(f.values) && size(f.values) == 1)",message="matchFields may only select metadata.name, with operator In or NotIn and one value"
type NodeSelectorTerm struct {
	// matchExpressions: requirements on node labels.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	MatchExpressions []NodeSelectorRequirement `json:"matchExpressions,omitempty"`

	// matchFields: requirements on node fields (only metadata.name).
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	MatchFields []NodeSelectorRequirement `json:"matchFields,omitempty"`
}

// NodeSelectorRequirement is the core API's NodeSelectorRequirement.
//
// +kubebuilder:validation:XValidation:rule="self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) : self.operator in ['Exists', 'DoesNotExist'] ? (!has(self.values) || size(self.values) == 0) : (has(self.values) && size(self.values) == 1)",message="values must be set with operator In or NotIn, empty with Exists or DoesNotExist, and one value with Gt or Lt"
type NodeSelectorRequirement struct {
	// key is the node label (or field) the requirement applies to.
	//
	// +required
	Key LabelKey `json:"key"`

	// operator is In, NotIn, Exists, DoesNotExist, Gt or Lt.
	//
	// +required
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist;Gt;Lt
	Operator string `json:"operator"`

	// values to compare with.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	Values []string `json:"values,omitempty"`
}

// PreferredSchedulingTerm is the core API's PreferredSchedulingTerm.
type PreferredSchedulingTerm struct {
	// weight of the preference, from 1 to 100.
	//
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`

	// preference is the term nodes are matched against.
	//
	// +required
	Preference NodeSelectorTerm `json:"preference"`
}

// PodAffinity is the core API's PodAffinity, and its PodAntiAffinity.
type PodAffinity struct {
	// requiredDuringSchedulingIgnoredDuringExecution: terms every pod
	// placement must satisfy.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Required []PodAffinityTerm `json:"requiredDuringSchedulingIgnoredDuringExecution,omitempty"`

	// preferredDuringSchedulingIgnoredDuringExecution: weighted preferences.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Preferred []WeightedPodAffinityTerm `json:"preferredDuringSchedulingIgnoredDuringExecution,omitempty"`
}

// PodAffinityTerm is the core API's PodAffinityTerm.
//
// +kubebuilder:validation:XValidation:rule="has(self.labelSelector) || ((!has(self.matchLabelKeys) || size(self.matchLabelKeys) == 0) && (!has(self.mismatchLabelKeys) || size(self.mismatchLabelKeys) == 0))",message="matchLabelKeys and mismatchLabelKeys need a labelSelector"
// +kubebuilder:validation:XValidation:rule="!has(self.matchLabelKeys) || !has(self.mismatchLabelKeys) || !self.matchLabelKeys.exists(k, k in self.mismatchLabelKeys)",message="a key may not be in both matchLabelKeys and mismatchLabelKeys"
// +kubebuilder:validation:XValidation:rule="!has(self.matchLabelKeys) || !has(self.labelSelector) || !has(self.labelSelector.matchLabels) || !has(self.labelSelector.matchExpressions) || !self.matchLabelKeys.exists(k, k in self.labelSelector.matchLabels && self.labelSelector.matchExpressions.exists(e, e.key == k))",message="a key of matchLabelKeys must not be in both labelSelector.matchLabels and labelSelector.matchExpressions"
type PodAffinityTerm struct {
	// labelSelector finds the pods this term is about.
	//
	// +optional
	LabelSelector *LabelSelector `json:"labelSelector,omitempty"`

	// namespaces the pods are looked for in; the Memcached's when empty.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces,omitempty"`

	// topologyKey is the node label whose values are the domains.
	//
	// +required
	TopologyKey LabelKey `json:"topologyKey"`

	// namespaceSelector selects namespaces the pods are looked for in.
	//
	// +optional
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`

	// matchLabelKeys are pod label keys whose values narrow the selector.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	MatchLabelKeys []LabelKey `json:"matchLabelKeys,omitempty"`

	// mismatchLabelKeys are pod label keys whose values exclude pods.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	MismatchLabelKeys []LabelKey `json:"mismatchLabelKeys,omitempty"`
}

// WeightedPodAffinityTerm is the core API's WeightedPodAffinityTerm.
type WeightedPodAffinityTerm struct {
	// weight of the preference, from 1 to 100.
	//
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`

	// podAffinityTerm is the preferred term.
	//
	// +required
	PodAffinityTerm PodAffinityTerm `json:"podAffinityTerm"`
}
