package v1

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Kinds of policy groups a PolicyReference can name.
const (
	KindClusterAdmissionPolicyGroup = "ClusterAdmissionPolicyGroup"
	KindAdmissionPolicyGroup        = "AdmissionPolicyGroup"
)

// IsGroupKind tells whether kind is one of the policy-group kinds, whose revisions hold a
// PolicyGroupSpec rather than a PolicySpec.
func IsGroupKind(kind string) bool {
	return kind == KindClusterAdmissionPolicyGroup || kind == KindAdmissionPolicyGroup
}

// PolicyGroupMember is one policy of a group: a module and its settings. Its name in the group's
// policies map is the function the group's expression calls for its verdict.
type PolicyGroupMember struct {
	// Module is where the member comes from: registry://, https://, file://, or a plain path.
	// +kubebuilder:validation:MinLength=1
	Module string `json:"module"`

	// Settings are passed to the member as they are.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Settings *runtime.RawExtension `json:"settings,omitempty"`

	// ExecutionMode is the module's ABI when its metadata does not say (Regent's addition).
	// +optional
	ExecutionMode ExecutionMode `json:"executionMode,omitempty"`

	// ContextAwareResources are the kinds the member may read while it evaluates. Only members of
	// a ClusterAdmissionPolicyGroup may have them, as in Kubewarden.
	// +listType=atomic
	// +optional
	ContextAwareResources []ContextAwareResource `json:"contextAwareResources,omitempty"`
}

// Why the member names are checked so: the expression calls each member as a CEL function of
// that name, so a name must be a CEL identifier and not one of CEL's reserved words (Kubewarden
// refuses the same names).

// PolicyGroupSpec is what ClusterAdmissionPolicyGroup and AdmissionPolicyGroup share. The fields
// it shares with PolicySpec have the same names, so the webhook of a group is built exactly as a
// policy's is.
// +kubebuilder:validation:XValidation:rule="!has(self.timeoutEvalSeconds) || !has(self.timeoutSeconds) || self.timeoutEvalSeconds <= self.timeoutSeconds",message="timeoutEvalSeconds cannot be greater than timeoutSeconds"
type PolicyGroupSpec struct {
	// PolicyServer names the PolicyServer that serves this group. It cannot change.
	// +kubebuilder:default=default
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the field is immutable"
	// +optional
	PolicyServer string `json:"policyServer,omitempty"`

	// Mode protect rejects what the group rejects; monitor admits and records the answer. Monitor
	// may become protect but not the reverse.
	// +kubebuilder:default=protect
	// +kubebuilder:validation:XValidation:rule="!(oldSelf == 'protect' && self == 'monitor')",message="field cannot transition from protect to monitor. Recreate instead."
	// +optional
	Mode PolicyMode `json:"mode,omitempty"`

	// Policies are the group's members by name; the expression calls each name as a function
	// returning whether that member accepts the request.
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-zA-Z_][a-zA-Z0-9_]*$'))",message="policy group member name is invalid: it must be a CEL identifier (letters, digits and _, not starting with a digit)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['true','false','null','in','as','break','const','continue','else','for','function','if','import','let','loop','package','namespace','return','var','void','while']))",message="policy group member name is invalid: it is a CEL reserved word"
	Policies map[string]PolicyGroupMember `json:"policies"`

	// Expression is a CEL expression over the members, each called by name (`a() && !b()`); the
	// group accepts a request when it evaluates to true.
	// +kubebuilder:validation:MinLength=1
	Expression string `json:"expression"`

	// Message is the group's rejection message; the messages of the members that rejected the
	// request are in the response's status.details.causes.
	// +kubebuilder:validation:MinLength=1
	Message string `json:"message"`

	// Rules say which requests reach the group, as in an admission webhook.
	Rules []admissionregistrationv1.RuleWithOperations `json:"rules"`

	// NamespaceSelector and ObjectSelector narrow the requests sent to the group.
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

	// TimeoutEvalSeconds bounds each member's evaluation in the policy server.
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=30
	// +optional
	TimeoutEvalSeconds *int32 `json:"timeoutEvalSeconds,omitempty"`

	// MatchPolicy is the webhook's matchPolicy: Exact or Equivalent (the default).
	// +kubebuilder:validation:Enum=Exact;Equivalent
	// +optional
	MatchPolicy *admissionregistrationv1.MatchPolicyType `json:"matchPolicy,omitempty"`

	// MatchConditions are the webhook's matchConditions, as they are.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions,omitempty"`

	// SideEffects is the webhook's sideEffects: None (the default) or NoneOnDryRun.
	// +kubebuilder:validation:Enum=None;NoneOnDryRun
	// +optional
	SideEffects *admissionregistrationv1.SideEffectClass `json:"sideEffects,omitempty"`

	// BackgroundAudit lets audit scans evaluate the group against existing objects. Not
	// omitempty, as on policies: an explicit false must reach the apiserver.
	// +kubebuilder:default=true
	// +optional
	BackgroundAudit bool `json:"backgroundAudit"`
}

// ClusterAdmissionPolicyGroup is a group of policies for the whole cluster, combined by a CEL
// expression.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=capg
// +kubebuilder:printcolumn:name="Policy Server",type=string,JSONPath=".spec.policyServer"
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=".spec.mode"
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=".status.policyStatus"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Serving",type=integer,JSONPath=".status.servingGeneration"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type ClusterAdmissionPolicyGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Kubewarden lets the members of a cluster-wide group read the cluster; Regent does not grant
	// the policy server that access for group members yet, so it refuses the field rather than
	// let the member's lookups fail at admission time.

	// +kubebuilder:validation:XValidation:rule="self.policies.all(k, !has(self.policies[k].contextAwareResources))",message="contextAwareResources on policy group members is not supported by Regent yet: a member that reads the cluster must be a ClusterAdmissionPolicy"
	Spec   PolicyGroupSpec `json:"spec"`
	Status PolicyStatus    `json:"status,omitempty"`
}

// ClusterAdmissionPolicyGroupList is a list of ClusterAdmissionPolicyGroups.
// +kubebuilder:object:root=true
type ClusterAdmissionPolicyGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterAdmissionPolicyGroup `json:"items"`
}

// AdmissionPolicyGroup is a group of policies for the requests of its own namespace.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=apg
// +kubebuilder:printcolumn:name="Policy Server",type=string,JSONPath=".spec.policyServer"
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=".spec.mode"
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=".status.policyStatus"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Serving",type=integer,JSONPath=".status.servingGeneration"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type AdmissionPolicyGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// As on an AdmissionPolicy: its members may not read the cluster, and its rules only match
	// namespaced resources (the webhook's namespaceSelector does not apply to cluster-scoped ones).

	// +kubebuilder:validation:XValidation:rule="self.policies.all(k, !has(self.policies[k].contextAwareResources))",message="contextAwareResources is only allowed on the members of a ClusterAdmissionPolicyGroup: a namespaced group may not read cluster resources"
	// +kubebuilder:validation:XValidation:rule="self.rules.all(r, !has(r.scope) || r.scope == 'Namespaced')",message="an AdmissionPolicyGroup only matches namespaced resources: rules[].scope must be Namespaced or left out (Cluster and * are for a ClusterAdmissionPolicyGroup)"
	Spec   PolicyGroupSpec `json:"spec"`
	Status PolicyStatus    `json:"status,omitempty"`
}

// AdmissionPolicyGroupList is a list of AdmissionPolicyGroups.
// +kubebuilder:object:root=true
type AdmissionPolicyGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AdmissionPolicyGroup `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClusterAdmissionPolicyGroup{}, &ClusterAdmissionPolicyGroupList{},
		&AdmissionPolicyGroup{}, &AdmissionPolicyGroupList{})
}
