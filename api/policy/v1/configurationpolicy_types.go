package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The ConfigurationPolicy kind follows the schema of OCM's config-policy-controller field for
// field, so every ConfigurationPolicy written for OCM (policy-collection included) applies
// unchanged with strict field validation. Regent's own addition is status.lastEvaluatedGeneration,
// which the rollout gates on.

// ComplianceType says how objects on the cluster are compared with an object template: musthave
// (the template is a subset of the object), mustonlyhave (the fields given match exactly) or
// mustnothave (no such object may exist). OCM accepts three capitalisations of each.
// +kubebuilder:validation:Enum=MustHave;Musthave;musthave;MustOnlyHave;Mustonlyhave;mustonlyhave;MustNotHave;Mustnothave;mustnothave
type ComplianceType string

const (
	MustHave     ComplianceType = "musthave"
	MustOnlyHave ComplianceType = "mustonlyhave"
	MustNotHave  ComplianceType = "mustnothave"
)

// MetadataComplianceType overrides the complianceType for labels and annotations.
// +kubebuilder:validation:Enum=MustHave;Musthave;musthave;MustOnlyHave;Mustonlyhave;mustonlyhave
type MetadataComplianceType string

// Severity is the user's rating of a violation of the policy.
// +kubebuilder:validation:Enum=low;Low;medium;Medium;high;High;critical;Critical
type Severity string

// PruneObjectBehavior says which objects the policy deletes when it is deleted or stops managing
// them.
// +kubebuilder:validation:Enum=DeleteAll;DeleteIfCreated;None
type PruneObjectBehavior string

// RecordDiff says where the difference between template and object is recorded.
// +kubebuilder:validation:Enum=Log;InStatus;None
type RecordDiff string

// RecreateOption says when an object is deleted and recreated instead of updated.
// +kubebuilder:validation:Enum=None;IfRequired;Always
type RecreateOption string

// NonEmptyString is a string that must not be empty.
// +kubebuilder:validation:MinLength=1
type NonEmptyString string

// NamespaceSelector chooses the namespaces of namespaced object templates that name no namespace.
// All rules combine; with only a label selector, include behaves as ["*"].
type NamespaceSelector struct {
	*metav1.LabelSelector `json:",inline"`

	// Include lists namespace names or filepath-style patterns ("prod-*") to select.
	// +optional
	Include []NonEmptyString `json:"include,omitempty"`

	// Exclude lists namespace names or filepath-style patterns to leave out.
	// +optional
	Exclude []NonEmptyString `json:"exclude,omitempty"`
}

// EvaluationInterval is the minimum time between evaluations per compliance state: a duration,
// "watch" (the default: re-evaluate when a watched object changes) or "never".
type EvaluationInterval struct {
	// +kubebuilder:validation:Pattern=`^(?:(?:(?:[0-9]+(?:.[0-9])?)(?:h|m|s|(?:ms)|(?:us)|(?:ns)))|never|watch)+$`
	// +optional
	Compliant string `json:"compliant,omitempty"`
	// +kubebuilder:validation:Pattern=`^(?:(?:(?:[0-9]+(?:.[0-9])?)(?:h|m|s|(?:ms)|(?:us)|(?:ns)))|never|watch)+$`
	// +optional
	NonCompliant string `json:"noncompliant,omitempty"`
}

// CustomMessage holds Go templates for the message of compliance events, one per compliance
// state, rendered over .DefaultMessage and .Policy (with each related object in full).
type CustomMessage struct {
	// +optional
	Compliant string `json:"compliant,omitempty"`
	// +optional
	NonCompliant string `json:"noncompliant,omitempty"`
}

// ObjectTemplate is the desired state of the objects of one kind.
type ObjectTemplate struct {
	// ComplianceType says how matching objects are compared with the objectDefinition.
	ComplianceType ComplianceType `json:"complianceType"`

	// MetadataComplianceType, when set, is used for labels and annotations instead of
	// complianceType.
	// +optional
	MetadataComplianceType MetadataComplianceType `json:"metadataComplianceType,omitempty"`

	// RecreateOption says when to delete and recreate an object instead of updating it.
	// +kubebuilder:default=None
	// +optional
	RecreateOption RecreateOption `json:"recreateOption,omitempty"`

	// ObjectDefinition is the (partial) object: apiVersion and kind are required; without
	// metadata.name every object of the kind in the selected namespaces is compared.
	// +kubebuilder:pruning:PreserveUnknownFields
	ObjectDefinition runtime.RawExtension `json:"objectDefinition"`

	// RecordDiff says where to record the difference between template and object: InStatus
	// (relatedObjects[].properties.diff; the default except for ConfigMaps and Secrets, which are
	// censored), Log, or None. A Secret's difference is never recorded in the status.
	// +optional
	RecordDiff RecordDiff `json:"recordDiff,omitempty"`

	// ObjectSelector selects objects by label when the objectDefinition names none.
	// +optional
	ObjectSelector *metav1.LabelSelector `json:"objectSelector,omitempty"`
}

// ConfigurationPolicySpec is the desired configuration of objects on the cluster and what to do
// when the cluster differs.
type ConfigurationPolicySpec struct {
	// +optional
	CustomMessage CustomMessage `json:"customMessage,omitempty"`

	// +optional
	Severity Severity `json:"severity,omitempty"`

	// RemediationAction is inform (report only) or enforce (create, update and delete objects).
	// +kubebuilder:default=inform
	// +optional
	RemediationAction RemediationAction `json:"remediationAction"`

	// +optional
	EvaluationInterval EvaluationInterval `json:"evaluationInterval,omitempty"`

	// +kubebuilder:default=None
	// +optional
	PruneObjectBehavior PruneObjectBehavior `json:"pruneObjectBehavior,omitempty"`

	// NamespaceSelector chooses the namespaces of namespaced templates without a namespace.
	// +optional
	NamespaceSelector NamespaceSelector `json:"namespaceSelector,omitempty"`

	// ObjectTemplates are the objects to check, create, update or delete.
	// +optional
	ObjectTemplates []*ObjectTemplate `json:"object-templates,omitempty"`

	// ObjectTemplatesRaw is a Go template producing object-templates as YAML: its managed-cluster
	// templates are resolved, then it is parsed as the object-templates. It excludes
	// object-templates.
	// +optional
	ObjectTemplatesRaw string `json:"object-templates-raw,omitempty"`
}

// TemplateCondition is the result of one evaluation of an object template.
type TemplateCondition struct {
	// Type is violation or notification.
	Type string `json:"type"`
	// +optional
	Status corev1.ConditionStatus `json:"status,omitempty"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// TemplateValidity is deprecated in OCM and kept so its status documents still validate.
type TemplateValidity struct {
	// +optional
	Valid *bool `json:"valid,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
}

// TemplateStatus is the compliance of one object template.
type TemplateStatus struct {
	// +optional
	ComplianceState ComplianceState `json:"Compliant,omitempty"`
	// +optional
	// +patchMergeKey=type
	// +patchStrategy=merge
	Conditions []TemplateCondition `json:"conditions,omitempty"`
	// +optional
	Validity TemplateValidity `json:"Validity,omitempty"`
}

// ObjectMetadata identifies a related object within its kind.
type ObjectMetadata struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// ObjectResource identifies a related object.
type ObjectResource struct {
	// +optional
	Metadata ObjectMetadata `json:"metadata,omitempty"`
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
	// +optional
	Kind string `json:"kind,omitempty"`
}

// ObjectProperties are what the policy knows about a related object beyond its identity.
type ObjectProperties struct {
	// CreatedByPolicy is true when the policy created the object.
	// +optional
	CreatedByPolicy *bool `json:"createdByPolicy,omitempty"`
	// +optional
	UID string `json:"uid,omitempty"`
	// +optional
	Diff string `json:"diff,omitempty"`
}

// RelatedObject is an object the policy looked at, with its compliance.
type RelatedObject struct {
	// +optional
	Properties *ObjectProperties `json:"properties,omitempty"`
	// +optional
	Object ObjectResource `json:"object,omitempty"`
	// +optional
	Compliant string `json:"compliant,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
}

// ConfigurationPolicyStatus is the observed compliance of the cluster with the policy.
type ConfigurationPolicyStatus struct {
	// +optional
	ComplianceState ComplianceState `json:"compliant,omitempty"`

	// CompliancyDetails has one entry per object template, in order.
	// +optional
	CompliancyDetails []TemplateStatus `json:"compliancyDetails,omitempty"`

	// LastEvaluated is the RFC 3339 time of the last evaluation that changed the status.
	// +optional
	LastEvaluated string `json:"lastEvaluated,omitempty"`

	// LastEvaluatedGeneration is the generation of the spec that produced this status.
	// +optional
	LastEvaluatedGeneration int64 `json:"lastEvaluatedGeneration,omitempty"`

	// RelatedObjects are the objects the templates matched or looked for.
	// +optional
	RelatedObjects []RelatedObject `json:"relatedObjects,omitempty"`
}

// ConfigurationPolicy compares objects on a managed cluster with object templates, reports
// whether they comply and, when enforced, creates, updates or deletes them until they do.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=configurationpolicies,scope=Namespaced
// +kubebuilder:printcolumn:name="Compliance state",type="string",JSONPath=".status.compliant"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ConfigurationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec ConfigurationPolicySpec `json:"spec,omitempty"`
	// +optional
	Status ConfigurationPolicyStatus `json:"status,omitempty"`
}

// ConfigurationPolicyList is a list of ConfigurationPolicies.
// +kubebuilder:object:root=true
type ConfigurationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConfigurationPolicy `json:"items"`
}

func init() { SchemeBuilder.Register(&ConfigurationPolicy{}, &ConfigurationPolicyList{}) }
