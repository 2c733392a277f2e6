package v1alpha1

// Condition types of a Memcached's status.
const (
	// ConditionAvailable is True when at least the minimum number of
	// memcached pods (all but one of spec.size, and at least one) are ready.
	// This is the tutorial operator's condition: `kubectl wait
	// --for=condition=Available memcached/NAME` waits on it.
	ConditionAvailable = "Available"

	// ConditionProgressing is True while the StatefulSet is rolling out a
	// change or scaling, and False once the rollout is complete or blocked.
	ConditionProgressing = "Progressing"

	// ConditionDegraded is True when the cache cannot reach its desired
	// state without help: pods that cannot start, a StatefulSet, Service or
	// PodDisruptionBudget of its name that the operator does not own, a
	// Secret it names that is missing or unusable, or an apply the
	// apiserver refuses.
	ConditionDegraded = "Degraded"

	// ConditionReconciling is the kstatus condition: True while the
	// observed state is not yet the desired state. Flux and other kstatus
	// readers report the object InProgress while it is True.
	ConditionReconciling = "Reconciling"

	// ConditionStalled is the kstatus condition: True when progress has
	// stopped and needs a person. kstatus readers report the object Failed
	// while it is True.
	ConditionStalled = "Stalled"

	// ConditionMonitored is present while spec.monitoring is enabled: True
	// when the Memcached's ServiceMonitor exists, False when the cluster
	// has no ServiceMonitor CRD or another object holds its name. The
	// exporter runs either way.
	ConditionMonitored = "Monitored"
)

// Condition reasons of a Memcached's status.
const (
	// ReasonMinimumReplicasAvailable: enough pods are ready.
	ReasonMinimumReplicasAvailable = "MinimumReplicasAvailable"
	// ReasonMinimumReplicasUnavailable: too few pods are ready.
	ReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	// ReasonScaledToZero: spec.size is 0, so no pod is expected.
	ReasonScaledToZero = "ScaledToZero"
	// ReasonRollingOut: the StatefulSet is rolling out or scaling.
	ReasonRollingOut = "RollingOut"
	// ReasonReplacingDeployment: the Memcached controls a Deployment (the
	// Operator SDK tutorial's operator made it, or a version of this one
	// before slots); the operator is replacing it with the StatefulSet, its
	// pods serving until every slot is ready.
	ReasonReplacingDeployment = "ReplacingDeployment"
	// ReasonRolloutComplete: every desired pod is updated and ready.
	ReasonRolloutComplete = "RolloutComplete"
	// ReasonStatefulSetNotOwned: a StatefulSet with the Memcached's name
	// exists and is not controlled by it; the operator leaves it alone.
	ReasonStatefulSetNotOwned = "StatefulSetNotOwned"
	// ReasonTakeOverDisabled: the Memcached controls a Deployment the
	// operator did not make (one the Operator SDK tutorial's operator
	// made), and the operator runs without --take-over, which replacing it
	// needs: the Deployment is left as it is.
	ReasonTakeOverDisabled = "TakeOverDisabled"
	// ReasonServiceNotOwned: a Service with the Memcached's name exists and
	// is not controlled by it; the operator leaves it alone.
	ReasonServiceNotOwned = "ServiceNotOwned"
	// ReasonPodDisruptionBudgetNotOwned: a PodDisruptionBudget with the
	// Memcached's name exists and is not controlled by it; the operator
	// leaves it alone.
	ReasonPodDisruptionBudgetNotOwned = "PodDisruptionBudgetNotOwned"
	// ReasonServiceMonitorNotOwned: a ServiceMonitor with the Memcached's
	// name exists and is not controlled by it; the operator leaves it alone.
	ReasonServiceMonitorNotOwned = "ServiceMonitorNotOwned"
	// ReasonNetworkPolicyNotOwned: a NetworkPolicy with the Memcached's
	// name exists and is not controlled by it.
	ReasonNetworkPolicyNotOwned = "NetworkPolicyNotOwned"
	// ReasonConfigMapNotOwned: a ConfigMap with the name of the
	// Memcached's membership ("<name>-membership") exists and is not
	// controlled by it.
	ReasonConfigMapNotOwned = "ConfigMapNotOwned"
	// ReasonServiceMonitorReady: the Memcached's ServiceMonitor exists.
	ReasonServiceMonitorReady = "ServiceMonitorReady"
	// ReasonServiceMonitorCRDMissing: the cluster had no ServiceMonitor CRD
	// (monitoring.coreos.com/v1) when the operator started.
	ReasonServiceMonitorCRDMissing = "ServiceMonitorCRDMissing"
	// ReasonSecretMissing: a Secret that spec.tls or spec.auth names does
	// not exist, or lacks a key the pods need; the operator holds the
	// StatefulSet as it is until it does.
	ReasonSecretMissing = "SecretMissing"
	// ReasonSecretInvalid: a Secret that spec.tls or spec.auth names holds
	// what memcached cannot use (a certificate that does not match its
	// key, an authentication file without users, ...); the operator holds
	// the StatefulSet as it is until it is fixed.
	ReasonSecretInvalid = "SecretInvalid"
	// ReasonSecretUnreadable: the operator cannot read a Secret that
	// spec.tls or spec.auth names (its role does not allow it, or the
	// apiserver fails); it holds the StatefulSet as it is until it can.
	ReasonSecretUnreadable = "SecretUnreadable"
	// ReasonApplyFailed: the apiserver refused an object the operator applied.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonStatefulSetPending: the StatefulSet has not been observed yet.
	ReasonStatefulSetPending = "StatefulSetPending"
	// ReasonImagePullFailed: pods cannot pull their image (ErrImagePull,
	// ImagePullBackOff, InvalidImageName): the message names the image and
	// the kubelet's error.
	ReasonImagePullFailed = "ImagePullFailed"
	// ReasonContainerConfigInvalid: the kubelet cannot create or start a
	// container of the pods (CreateContainerConfigError,
	// CreateContainerError, RunContainerError, or a run that ends in
	// StartError, as with an image that has no memcached).
	ReasonContainerConfigInvalid = "ContainerConfigInvalid"
	// ReasonOOMKilled: a container of the pods was killed for using more
	// memory than its limit.
	ReasonOOMKilled = "OOMKilled"
	// ReasonContainerCrashing: a container of the pods exits soon after it
	// starts (CrashLoopBackOff): the message has its exit code and the end
	// of its log.
	ReasonContainerCrashing = "ContainerCrashing"
	// ReasonPodsUnschedulable: the scheduler cannot place pods (not enough
	// CPU or memory, taints, affinity); the message is the scheduler's.
	// Not stalled: a node added by a person or an autoscaler places them.
	ReasonPodsUnschedulable = "PodsUnschedulable"
	// ReasonPodsForbidden: the StatefulSet cannot create pods (a
	// ResourceQuota or an admission policy refuses them).
	ReasonPodsForbidden = "PodsForbidden"
	// ReasonAsExpected: nothing is wrong.
	ReasonAsExpected = "AsExpected"
	// ReasonCertificateExpiring is the Warning event's reason when
	// status.tls.expiresSoon turns true.
	ReasonCertificateExpiring = "CertificateExpiring"
	// ReasonReloadFailed (Progressing True): a pod could not load new
	// content of its Secrets in place, and the pods restart one at a time
	// to mount it.
	ReasonReloadFailed = "ReloadFailed"
	// ReasonMovingKeys (Progressing True): the size changed and the pods
	// move the keys the new membership gives another slot
	// (spec.keyMoves); the message says which step.
	ReasonMovingKeys = "MovingKeys"
	// ReasonMembershipUnpublished (Available False): a new Memcached with
	// spec.keyMoves has published no membership yet, so its clients find
	// no server: it waits for every slot to have a ready pod, 30 s at
	// most after its creation once one has.
	ReasonMembershipUnpublished = "MembershipUnpublished"
)
