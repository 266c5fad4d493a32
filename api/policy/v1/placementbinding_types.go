package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PlacementSubject names the placement a binding uses.
type PlacementSubject struct {
	// +kubebuilder:validation:Enum=apps.open-cluster-management.io;cluster.open-cluster-management.io
	APIGroup string `json:"apiGroup"`
	// +kubebuilder:validation:Enum=PlacementRule;Placement
	Kind string `json:"kind"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// Subject names a Policy or PolicySet a binding places.
type Subject struct {
	// +kubebuilder:validation:Enum=policy.open-cluster-management.io
	APIGroup string `json:"apiGroup"`
	// +kubebuilder:validation:Enum=Policy;PolicySet
	Kind string `json:"kind"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// BindingOverrides override fields of the bound policies on the clusters this binding selects.
type BindingOverrides struct {
	// RemediationAction overrides the policies' remediationAction. Only Enforce is an override;
	// ignored when the policy's rollout strategy is not All, since the rollout owns enforcement.
	// +kubebuilder:validation:Enum=Enforce;enforce
	// +optional
	RemediationAction string `json:"remediationAction,omitempty"`
}

// PlacementBinding binds Policies and PolicySets to a Placement.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=placementbindings,scope=Namespaced,shortName=pb
// +kubebuilder:subresource:status
type PlacementBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	BindingOverrides BindingOverrides `json:"bindingOverrides,omitempty"`
	// SubFilter "restricted" limits the binding to subjects also bound without it.
	// +kubebuilder:validation:Enum=restricted
	// +optional
	SubFilter string `json:"subFilter,omitempty"`

	PlacementRef PlacementSubject `json:"placementRef"`
	// +kubebuilder:validation:MinItems=1
	Subjects []Subject `json:"subjects"`

	// +optional
	Status PlacementBindingStatus `json:"status,omitempty"`
}

// PlacementBindingStatus is what Regent observed of a binding.
type PlacementBindingStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PlacementBindingList is a list of PlacementBindings.
// +kubebuilder:object:root=true
type PlacementBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PlacementBinding `json:"items"`
}

func init() { SchemeBuilder.Register(&PlacementBinding{}, &PlacementBindingList{}) }
