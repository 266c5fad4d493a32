package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
)

// RemediationAction says whether a policy only reports (inform) or also changes the cluster
// (enforce). OCM accepts both capitalisations; so does Regent, so existing YAML applies.
// +kubebuilder:validation:Enum=Inform;inform;Enforce;enforce
type RemediationAction string

const (
	Inform  RemediationAction = "inform"
	Enforce RemediationAction = "enforce"
)

// ComplianceState is the compliance of a policy, a template or a dependency.
// +kubebuilder:validation:Enum=Compliant;Pending;NonCompliant
type ComplianceState string

const (
	Compliant    ComplianceState = "Compliant"
	NonCompliant ComplianceState = "NonCompliant"
	Pending      ComplianceState = "Pending"
)

// PolicySpec is the desired state of a Policy.
// +kubebuilder:validation:XValidation:rule="!has(self.rolloutStrategy) || !has(self.rolloutStrategy.type) || self.rolloutStrategy.type != 'Progressive' || !has(self.rolloutStrategy.progressivePerGroup)",message="rolloutStrategy.progressivePerGroup is only valid with type ProgressivePerGroup"
// +kubebuilder:validation:XValidation:rule="!has(self.rolloutStrategy) || !has(self.rolloutStrategy.type) || self.rolloutStrategy.type != 'ProgressivePerGroup' || !has(self.rolloutStrategy.progressive)",message="rolloutStrategy.progressive is only valid with type Progressive"
type PolicySpec struct {
	// Disabled removes the policy from every managed cluster while keeping it on the hub.
	Disabled bool `json:"disabled"`

	// CopyPolicyMetadata copies the root policy's labels and annotations to its replicas when true
	// (the default); when false only the policy framework's own metadata is copied.
	// +optional
	CopyPolicyMetadata *bool `json:"copyPolicyMetadata,omitempty"`

	// RemediationAction, when set, overrides the remediationAction of every template.
	// +optional
	RemediationAction RemediationAction `json:"remediationAction,omitempty"`

	// PolicyTemplates are the objects (ConfigurationPolicy, admission policies, any kind with a
	// compliance status) created on each managed cluster.
	PolicyTemplates []*PolicyTemplate `json:"policy-templates"`

	// Dependencies must all hold before any template of this policy is applied.
	// +optional
	Dependencies []PolicyDependency `json:"dependencies,omitempty"`

	// HubTemplateOptions tune how hub templates ({{hub ... hub}}) are resolved.
	// +optional
	HubTemplateOptions *HubTemplateOptions `json:"hubTemplateOptions,omitempty"`

	// RolloutStrategy says how enforcement reaches the selected clusters: All at once,
	// Progressive cluster by cluster, or ProgressivePerGroup decision group by decision group, each
	// step gated on the previous clusters turning Compliant.
	// +optional
	RolloutStrategy *clusterv1alpha1.RolloutStrategy `json:"rolloutStrategy,omitempty"`
}

// HubTemplateOptions are OCM's options for hub templates.
type HubTemplateOptions struct {
	// ServiceAccountName names a service account in the policy's namespace whose permissions hub
	// templates read with: any object it may list and watch, in any namespace. Without it, hub
	// templates read only objects of the policy's namespace and the ManagedCluster they are
	// resolved for. A missing service account or a read it may not make is reported on the
	// policy, and its replicas are left as they are.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// PolicyTemplate is one object a policy creates on a managed cluster.
type PolicyTemplate struct {
	// ObjectDefinition is the object to create, a complete Kubernetes object with apiVersion, kind
	// and metadata.name.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:EmbeddedResource
	// +kubebuilder:validation:Required
	ObjectDefinition runtime.RawExtension `json:"objectDefinition"`

	// ExtraDependencies must hold, besides the policy's dependencies, before this template is
	// applied.
	// +optional
	ExtraDependencies []PolicyDependency `json:"extraDependencies,omitempty"`

	// IgnorePending reports this template as Compliant while it waits for its dependencies.
	// +optional
	IgnorePending bool `json:"ignorePending,omitempty"`
}

// PolicyDependency names an object whose compliance must match before a template is applied.
// The rules are OCM's: apiVersion, kind, name and compliance are required, and a
// ConfigurationPolicy or CertificatePolicy is always looked up in the cluster namespace of the
// policy on the managed cluster, so it takes no namespace. Other kinds may name one; a Policy
// without one is looked up in the dependant's namespace.
// +kubebuilder:validation:XValidation:rule="has(self.apiVersion)",message="apiVersion is required"
// +kubebuilder:validation:XValidation:rule="has(self.kind)",message="kind is required"
// +kubebuilder:validation:XValidation:rule="!has(self.kind) || !(self.kind in ['ConfigurationPolicy', 'CertificatePolicy']) || !has(self.namespace) || size(self.namespace) == 0",message="namespace must be empty for a ConfigurationPolicy or CertificatePolicy dependency: it is looked up in the cluster namespace"
type PolicyDependency struct {
	metav1.TypeMeta `json:",inline"`

	// Name of the object depended on.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Namespace of the object depended on; empty for cluster-scoped kinds and, for Policies, the
	// namespace of the dependant.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Compliance the object must have.
	// +kubebuilder:validation:Enum=Compliant;Pending;NonCompliant
	Compliance ComplianceState `json:"compliance"`
}

// PolicyStatus is what the hub and the managed cluster observe of a Policy.
type PolicyStatus struct {
	// Placement lists the bindings and placements that select this policy (root policies only).
	// +optional
	Placement []*Placement `json:"placement,omitempty"`

	// Status lists compliance and rollout per managed cluster (root policies only).
	// +optional
	Status []*CompliancePerClusterStatus `json:"status,omitempty"`

	// ComplianceState is the aggregate compliance.
	// +optional
	ComplianceState ComplianceState `json:"compliant,omitempty"`

	// RolloutStatus is, on a root policy, the aggregate of its clusters (Progressing, which
	// includes ToApply, Succeeded or Failed); on a replica, the rollout status of its cluster.
	// +optional
	RolloutStatus RolloutStatus `json:"rolloutStatus,omitempty"`

	// LastEvaluatedGeneration is, on a replica, the generation of the hub replica whose spec the
	// managed cluster evaluated to produce this compliance. The rollout gates on it.
	// +optional
	LastEvaluatedGeneration int64 `json:"lastEvaluatedGeneration,omitempty"`

	// Details holds the compliance and its recent history per template (replicas).
	// +optional
	Details []*DetailsPerTemplate `json:"details,omitempty"`

	// Conditions say what the controllers did and why, for example a rollout stopped by its
	// failure budget.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Placement names one way the policy is selected.
type Placement struct {
	// +optional
	PlacementBinding string `json:"placementBinding,omitempty"`
	// PlacementRule (deprecated: bind a Placement instead) is the PlacementRule
	// (apps.open-cluster-management.io/v1) the binding refers to; its decisions select clusters
	// as one decision group.
	// +optional
	PlacementRule string `json:"placementRule,omitempty"`
	// +optional
	Placement string `json:"placement,omitempty"`
	// +optional
	PolicySet string `json:"policySet,omitempty"`
}

// CompliancePerClusterStatus is one cluster's line in a root policy's status.
type CompliancePerClusterStatus struct {
	// +optional
	ComplianceState ComplianceState `json:"compliant,omitempty"`
	// +optional
	RolloutStatus RolloutStatus `json:"rolloutStatus,omitempty"`
	// +optional
	ClusterName string `json:"clustername,omitempty"`
	// +optional
	ClusterNamespace string `json:"clusternamespace,omitempty"`
	// LastTransitionTime is when RolloutStatus last changed; the rollout's soak time and progress
	// deadline count from it, so a restarted hub resumes with the same clock.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
	// Violations is Regent's addition: how many existing objects on the cluster fail the
	// policy's admission and configuration checks (the fail count of the cluster's rolled-up
	// report, a Report named after the replica in the cluster namespace). Absent while the
	// cluster has reported none.
	// +optional
	Violations *int64 `json:"violations,omitempty"`
}

// DetailsPerTemplate is the compliance of one template.
type DetailsPerTemplate struct {
	// +optional
	TemplateMeta metav1.ObjectMeta `json:"templateMeta,omitempty"`
	// +optional
	ComplianceState ComplianceState `json:"compliant,omitempty"`
	// +optional
	History []ComplianceHistory `json:"history,omitempty"`
}

// ComplianceHistory is one compliance transition of a template.
type ComplianceHistory struct {
	// +optional
	LastTimestamp metav1.Time `json:"lastTimestamp,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	EventName string `json:"eventName,omitempty"`
}

// Policy is a set of templates to apply to managed clusters. On the hub a root Policy is bound to
// placements and replicated per cluster as <namespace>.<name>; on a managed cluster the replica's
// templates are created and their compliance reported back.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=policies,scope=Namespaced,shortName=plc
// +kubebuilder:printcolumn:name="Remediation action",type="string",JSONPath=".spec.remediationAction"
// +kubebuilder:printcolumn:name="Compliance state",type="string",JSONPath=".status.compliant"
// +kubebuilder:printcolumn:name="Rollout status",type="string",JSONPath=".status.rolloutStatus"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type Policy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PolicySpec   `json:"spec"`
	Status PolicyStatus `json:"status,omitempty"`
}

// PolicyList is a list of Policies.
// +kubebuilder:object:root=true
type PolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Policy `json:"items"`
}

func init() { SchemeBuilder.Register(&Policy{}, &PolicyList{}) }
