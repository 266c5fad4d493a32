package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	policyv1 "regent.dev/regent/api/policy/v1"
)

// NonEmptyString is a policy name.
// +kubebuilder:validation:MinLength=1
type NonEmptyString string

// PolicySetSpec lists the policies of a set.
type PolicySetSpec struct {
	// +optional
	Description string `json:"description,omitempty"`
	// Policies are names of Policies in the set's namespace.
	Policies []NonEmptyString `json:"policies"`
}

// PolicySetStatus is the aggregate of the set's policies.
type PolicySetStatus struct {
	// +optional
	Placement []PolicySetStatusPlacement `json:"placement,omitempty"`
	// +optional
	Compliant policyv1.ComplianceState `json:"compliant,omitempty"`
	// StatusMessage names, for example, policies of the set that do not exist or are disabled.
	// +optional
	StatusMessage string `json:"statusMessage,omitempty"`
}

// PolicySetStatusPlacement names a binding and placement that select the set.
type PolicySetStatusPlacement struct {
	// +optional
	PlacementBinding string `json:"placementBinding,omitempty"`
	// +optional
	Placement string `json:"placement,omitempty"`
	// +optional
	PlacementRule string `json:"placementRule,omitempty"`
}

// PolicySet groups policies so they are placed, and depended on, together.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=policysets,scope=Namespaced,shortName=plcset
// +kubebuilder:printcolumn:name="Compliance state",type="string",JSONPath=".status.compliant"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type PolicySet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PolicySetSpec   `json:"spec"`
	Status PolicySetStatus `json:"status,omitempty"`
}

// PolicySetList is a list of PolicySets.
// +kubebuilder:object:root=true
type PolicySetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicySet `json:"items"`
}

func init() { SchemeBuilder.Register(&PolicySet{}, &PolicySetList{}) }
