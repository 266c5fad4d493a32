package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// The kinds below are v1's under another version: the same spec and status types, the same
// validation rules and columns, so the two versions' schemas are identical.

// ClusterAdmissionPolicy is kubewardenv1.ClusterAdmissionPolicy served as v1alpha2.
// +kubebuilder:object:root=true
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
// +kubebuilder:deprecatedversion:warning="This version is deprecated. Please, consider using v1"
type ClusterAdmissionPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   kubewardenv1.ClusterAdmissionPolicySpec `json:"spec"`
	Status kubewardenv1.PolicyStatus               `json:"status,omitempty"`
}

// ClusterAdmissionPolicyList is a list of ClusterAdmissionPolicies.
// +kubebuilder:object:root=true
type ClusterAdmissionPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterAdmissionPolicy `json:"items"`
}

// AdmissionPolicy is kubewardenv1.AdmissionPolicy served as v1alpha2.
// +kubebuilder:object:root=true
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
// +kubebuilder:deprecatedversion:warning="This version is deprecated. Please, consider using v1"
type AdmissionPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="!has(self.contextAwareResources)",message="contextAwareResources is only allowed on a ClusterAdmissionPolicy: a namespaced policy may not read cluster resources"
	// +kubebuilder:validation:XValidation:rule="!has(self.allowNetworkBuiltins) || !self.allowNetworkBuiltins",message="allowNetworkBuiltins is only allowed on a ClusterAdmissionPolicy: a namespaced policy may not reach the network from the policy server"
	// +kubebuilder:validation:XValidation:rule="!has(self.allowInsideAdmissionControllerNamespace) || !self.allowInsideAdmissionControllerNamespace",message="allowInsideAdmissionControllerNamespace is only allowed on a ClusterAdmissionPolicy: an AdmissionPolicy only sees its own namespace"
	// +kubebuilder:validation:XValidation:rule="self.rules.all(r, !has(r.scope) || r.scope == 'Namespaced')",message="an AdmissionPolicy only matches namespaced resources: rules[].scope must be Namespaced or left out (Cluster and * are for a ClusterAdmissionPolicy)"
	Spec   kubewardenv1.PolicySpec   `json:"spec"`
	Status kubewardenv1.PolicyStatus `json:"status,omitempty"`
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
