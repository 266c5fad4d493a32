package v1

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PolicyMode says whether a policy's answer is enforced (protect) or only recorded (monitor).
// +kubebuilder:validation:Enum=protect;monitor
type PolicyMode string

const (
	ModeProtect PolicyMode = "protect"
	ModeMonitor PolicyMode = "monitor"
)

// ExecutionMode is the ABI a module speaks.
// +kubebuilder:validation:Enum=kubewarden-wapc;wasi;opa;gatekeeper
type ExecutionMode string

// PolicySpec is what ClusterAdmissionPolicy and AdmissionPolicy share.
// +kubebuilder:validation:XValidation:rule="!has(self.timeoutEvalSeconds) || !has(self.timeoutSeconds) || self.timeoutEvalSeconds <= self.timeoutSeconds",message="timeoutEvalSeconds cannot be greater than timeoutSeconds"
type PolicySpec struct {
	// PolicyServer names the PolicyServer that serves this policy. It cannot change, as in
	// Kubewarden: move a policy by recreating it.
	// +kubebuilder:default=default
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the field is immutable"
	// +optional
	PolicyServer string `json:"policyServer,omitempty"`

	// Module is where the policy comes from: registry://, https://, file://, or a plain path.
	// +kubebuilder:validation:MinLength=1
	Module string `json:"module"`

	// ExecutionMode is the module's ABI when its metadata does not say (Regent's addition;
	// Kubewarden reads it from the module's metadata).
	// +optional
	ExecutionMode ExecutionMode `json:"executionMode,omitempty"`

	// Mode protect rejects what the policy rejects; monitor admits and records the answer. As in
	// Kubewarden, monitor may become protect but not the reverse: recreate the policy instead.
	// +kubebuilder:default=protect
	// +kubebuilder:validation:XValidation:rule="!(oldSelf == 'protect' && self == 'monitor')",message="field cannot transition from protect to monitor. Recreate instead."
	// +optional
	Mode PolicyMode `json:"mode,omitempty"`

	// Settings are passed to the policy as they are.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Settings *runtime.RawExtension `json:"settings,omitempty"`

	// Rules say which requests reach the policy, as in an admission webhook.
	Rules []admissionregistrationv1.RuleWithOperations `json:"rules"`

	// Mutating lets the policy change objects.
	// +optional
	Mutating bool `json:"mutating,omitempty"`

	// NamespaceSelector and ObjectSelector narrow the requests sent to the policy.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// +optional
	ObjectSelector *metav1.LabelSelector `json:"objectSelector,omitempty"`

	// FailurePolicy is what the apiserver does when the policy server cannot answer.
	// +kubebuilder:validation:Enum=Ignore;Fail
	// +kubebuilder:default=Fail
	// +optional
	FailurePolicy *admissionregistrationv1.FailurePolicyType `json:"failurePolicy,omitempty"`

	// TimeoutSeconds bounds the apiserver's wait for an answer.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=30
	// +kubebuilder:default=10
	// +optional
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`

	// TimeoutEvalSeconds bounds the policy's evaluation in the policy server; unset,
	// timeoutSeconds does. An evaluation that runs out fails, and failurePolicy decides.
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=30
	// +optional
	TimeoutEvalSeconds *int32 `json:"timeoutEvalSeconds,omitempty"`

	// MatchPolicy says whether a request made through another group or version of a resource
	// the rules name is sent to the policy (Equivalent, the default) or not (Exact).
	// +kubebuilder:validation:Enum=Exact;Equivalent
	// +optional
	MatchPolicy *admissionregistrationv1.MatchPolicyType `json:"matchPolicy,omitempty"`

	// MatchConditions are CEL expressions a request matched by the rules and selectors must all
	// satisfy to reach the policy; they are the webhook's matchConditions, as they are.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions,omitempty"`

	// SideEffects is the webhook's sideEffects: None (the default) or NoneOnDryRun.
	// +kubebuilder:validation:Enum=None;NoneOnDryRun
	// +optional
	SideEffects *admissionregistrationv1.SideEffectClass `json:"sideEffects,omitempty"`

	// Message replaces the policy's rejection message; the policy's own message is kept in the
	// response's status.details.causes, as in Kubewarden.
	// +optional
	Message string `json:"message,omitempty"`

	// AllowInsideAdmissionControllerNamespace lets a ClusterAdmissionPolicy match requests in
	// the controller's namespace, which its webhook otherwise excludes so a policy cannot lock
	// the policy servers out. Only ClusterAdmissionPolicies may set it.
	// +optional
	AllowInsideAdmissionControllerNamespace bool `json:"allowInsideAdmissionControllerNamespace,omitempty"`

	// ReportAdmission turns the answers of a protect-mode policy into per-resource reports too
	// (Regent's addition); a monitor-mode policy's answers always are. Reports are written off
	// the admission path. A mutating policy's answers are not reported: its webhook sees the
	// object before it is final and, on create, before it has a UID to name its report.
	// +optional
	ReportAdmission bool `json:"reportAdmission,omitempty"`

	// Not omitempty, as in Kubewarden: an explicit false must reach the apiserver, or any
	// client's update (the controller adding its finalizer) would drop it and the default would
	// turn it back on.

	// BackgroundAudit lets audit scans evaluate the policy against existing objects.
	// +kubebuilder:default=true
	// +optional
	BackgroundAudit bool `json:"backgroundAudit"`

	// ContextAwareResources are the kinds the policy may read from the cluster while it
	// evaluates (Kubewarden's context-aware policies); a lookup of any other kind fails. Only
	// ClusterAdmissionPolicies may have them: an AdmissionPolicy is written by namespace users,
	// who must not read the cluster through the policy server's service account.
	// +listType=atomic
	// +optional
	ContextAwareResources []ContextAwareResource `json:"contextAwareResources,omitempty"`

	// AllowNetworkBuiltins lets an opa or gatekeeper policy call the Rego built-ins that reach
	// beyond the policy server's sandbox: http.send, net.lookup_ip_addr, and json.match_schema /
	// json.verify_schema (a schema may name a remote document). Without it a policy that calls
	// one fails to load, with a condition naming the built-in. Only ClusterAdmissionPolicies may
	// set it (Regent's addition): an AdmissionPolicy is written by namespace users, who must not
	// reach cloud metadata or internal services from the policy server's network.
	// +optional
	AllowNetworkBuiltins bool `json:"allowNetworkBuiltins,omitempty"`
}

// ContextAwareResource is a kind a policy may read, named as in a manifest.
type ContextAwareResource struct {
	// APIVersion is the kind's group/version ("v1" for the core group), e.g. "apps/v1".
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`
	// Kind is the resource's kind, e.g. "Namespace".
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
}

// PolicyPhase is what a user reads at a glance.
// +kubebuilder:validation:Enum=Pending;Active;Failed
type PolicyPhase string

const (
	PhasePending PolicyPhase = "Pending"
	PhaseActive  PolicyPhase = "Active"
	PhaseFailed  PolicyPhase = "Failed"
)

// Condition types of policies and revisions, from the lifecycle RFC, and Kubewarden's
// PolicyActive, which its documentation waits for (`kubectl wait --for=condition=PolicyActive`).
const (
	ConditionScheduled    = "Scheduled"
	ConditionInitialized  = "Initialized"
	ConditionReady        = "Ready"
	ConditionPolicyActive = "PolicyActive"
)

// PolicyStatusEnum is Kubewarden's status.policyStatus.
// +kubebuilder:validation:Enum=unscheduled;scheduled;pending;active
type PolicyStatusEnum string

const (
	// PolicyStatusUnscheduled: no PolicyServer is named.
	PolicyStatusUnscheduled PolicyStatusEnum = "unscheduled"
	// PolicyStatusScheduled: the named PolicyServer does not exist (yet), or is being deleted.
	PolicyStatusScheduled PolicyStatusEnum = "scheduled"
	// PolicyStatusPending: the PolicyServer exists and no generation is served yet.
	PolicyStatusPending PolicyStatusEnum = "pending"
	// PolicyStatusActive: the apiserver sends the policy's requests to the policy server.
	PolicyStatusActive PolicyStatusEnum = "active"
)

// PolicyCondition is a revision's condition. The RFC extends conditions with the replica that
// reports them; Regent keeps those reports in status.replicas instead, so conditions stay
// unique by type and `kubectl wait --for=condition=...` means what it says.
type PolicyCondition struct {
	// +kubebuilder:validation:MinLength=1
	Type string `json:"type"`
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status metav1.ConditionStatus `json:"status"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// PolicyGeneration is the policy generation the condition is about.
	// +optional
	PolicyGeneration int64 `json:"policyGeneration,omitempty"`
}

// ReplicaStatus is one policy-server replica's report on a generation: whether it loaded it
// (the RFC's per-replica Ready).
type ReplicaStatus struct {
	// Replica is the policy-server replica's number.
	// +kubebuilder:validation:Minimum=0
	Replica int32 `json:"replica"`
	// PolicyGeneration is the policy generation the report is about.
	// +optional
	PolicyGeneration int64 `json:"policyGeneration,omitempty"`
	// Ready: True when the replica serves the generation, False when it could not load it,
	// Unknown while it has not said.
	// +kubebuilder:validation:Enum=True;False;Unknown
	Ready metav1.ConditionStatus `json:"ready"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// PolicyStatus is what the controller and the policy server report on a policy.
type PolicyStatus struct {
	// PolicyStatus is Kubewarden's summary: unscheduled, scheduled, pending or active. It stays
	// active while a newer generation is rolled out, since an older one keeps answering.
	// +optional
	PolicyStatus PolicyStatusEnum `json:"policyStatus,omitempty"`
	// Phase: Pending while the newest generation is not served by every replica, Active when it
	// is, Failed when it cannot be (the previous generation keeps serving).
	// +optional
	Phase PolicyPhase `json:"phase,omitempty"`
	// ServingGeneration is the generation the webhook configuration points at.
	// +optional
	ServingGeneration int64 `json:"servingGeneration,omitempty"`
	// Mode is the mode of the serving generation.
	// +optional
	Mode PolicyMode `json:"mode,omitempty"`
	// Conditions of the newest generation, one per type, each with the generation it is about
	// as observedGeneration: Scheduled, Initialized, Ready (every live replica serves it) and
	// PolicyActive (the webhook configuration calls it).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Replicas are the live policy-server replicas' reports on the newest generation.
	// +listType=map
	// +listMapKey=replica
	// +optional
	Replicas []ReplicaStatus `json:"replicas,omitempty"`
}

// ClusterAdmissionPolicy is an admission policy for the whole cluster.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cap
// +kubebuilder:printcolumn:name="Policy Server",type=string,JSONPath=".spec.policyServer"
// +kubebuilder:printcolumn:name="Mutating",type=boolean,JSONPath=".spec.mutating"
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=".spec.mode"
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=".status.policyStatus"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Serving",type=integer,JSONPath=".status.servingGeneration"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Severity",type=string,JSONPath=".metadata.annotations['io\\.kubewarden\\.policy\\.severity']",priority=1
// +kubebuilder:printcolumn:name="Category",type=string,JSONPath=".metadata.annotations['io\\.kubewarden\\.policy\\.category']",priority=1
type ClusterAdmissionPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterAdmissionPolicySpec `json:"spec"`
	Status PolicyStatus               `json:"status,omitempty"`
}

// ClusterAdmissionPolicySpec adds to PolicySpec what only cluster-wide policies have.
type ClusterAdmissionPolicySpec struct {
	PolicySpec `json:",inline"`
}

// ClusterAdmissionPolicyList is a list of ClusterAdmissionPolicies.
// +kubebuilder:object:root=true
type ClusterAdmissionPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterAdmissionPolicy `json:"items"`
}

// AdmissionPolicy is an admission policy for the requests of its own namespace.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=ap
// +kubebuilder:printcolumn:name="Policy Server",type=string,JSONPath=".spec.policyServer"
// +kubebuilder:printcolumn:name="Mutating",type=boolean,JSONPath=".spec.mutating"
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=".spec.mode"
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=".status.policyStatus"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Serving",type=integer,JSONPath=".status.servingGeneration"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Severity",type=string,JSONPath=".metadata.annotations['io\\.kubewarden\\.policy\\.severity']",priority=1
// +kubebuilder:printcolumn:name="Category",type=string,JSONPath=".metadata.annotations['io\\.kubewarden\\.policy\\.category']",priority=1
type AdmissionPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Why rules[].scope must be Namespaced: the apiserver does not apply a webhook's
	// namespaceSelector to cluster-scoped objects, so a rule of scope Cluster or "*" would let a
	// namespace user intercept ClusterRoleBindings and every other cluster-wide write; the
	// controller also forces Namespaced when it builds the webhook, for objects stored before
	// this rule.

	// +kubebuilder:validation:XValidation:rule="!has(self.contextAwareResources)",message="contextAwareResources is only allowed on a ClusterAdmissionPolicy: a namespaced policy may not read cluster resources"
	// +kubebuilder:validation:XValidation:rule="!has(self.allowNetworkBuiltins) || !self.allowNetworkBuiltins",message="allowNetworkBuiltins is only allowed on a ClusterAdmissionPolicy: a namespaced policy may not reach the network from the policy server"
	// +kubebuilder:validation:XValidation:rule="!has(self.allowInsideAdmissionControllerNamespace) || !self.allowInsideAdmissionControllerNamespace",message="allowInsideAdmissionControllerNamespace is only allowed on a ClusterAdmissionPolicy: an AdmissionPolicy only sees its own namespace"
	// +kubebuilder:validation:XValidation:rule="self.rules.all(r, !has(r.scope) || r.scope == 'Namespaced')",message="an AdmissionPolicy only matches namespaced resources: rules[].scope must be Namespaced or left out (Cluster and * are for a ClusterAdmissionPolicy)"
	Spec   PolicySpec   `json:"spec"`
	Status PolicyStatus `json:"status,omitempty"`
}

// AdmissionPolicyList is a list of AdmissionPolicies.
// +kubebuilder:object:root=true
type AdmissionPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AdmissionPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClusterAdmissionPolicy{}, &ClusterAdmissionPolicyList{}, &AdmissionPolicy{}, &AdmissionPolicyList{})
}
