package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PolicyServerLabel names, on a PolicyRevision, the PolicyServer that serves it, so each server
// watches only its own revisions.
const PolicyServerLabel = "kubewarden.io/policy-server"

// RollbackAnnotation on a policy names a kept generation to restore: the controller copies that
// revision's spec back to the policy, which then goes through the lifecycle as a new generation.
const RollbackAnnotation = "regent.dev/rollback-to-generation"

// PolicyReference names the policy a revision versions. A revision lives in the controller's
// namespace, so an ownerReference cannot point at a policy in another namespace or at a
// cluster-scoped one.
type PolicyReference struct {
	APIVersion string `json:"apiVersion"`
	// +kubebuilder:validation:Enum=ClusterAdmissionPolicy;AdmissionPolicy;ClusterAdmissionPolicyGroup;AdmissionPolicyGroup
	Kind string `json:"kind"`
	Name string `json:"name"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	UID string `json:"uid,omitempty"`
}

// PolicyRevisionSpec is one generation of a policy, as the RFC lays it out.
type PolicyRevisionSpec struct {
	ObjectReference PolicyReference `json:"objectReference"`
	// PolicyGeneration is the policy's metadata.generation this revision holds.
	// +kubebuilder:validation:Minimum=1
	PolicyGeneration int64 `json:"policyGeneration"`
	// Enabled revisions are loaded by the policy server; disabled ones are kept for rollback.
	Enabled bool `json:"enabled"`
	// Data is the policy's spec at that generation.
	// +kubebuilder:pruning:PreserveUnknownFields
	Data runtime.RawExtension `json:"data"`
}

// PolicyRevisionStatus is reported by the leader (Initialized) and each replica (Replicas).
type PolicyRevisionStatus struct {
	// ModuleDigest is the sha256 of the module the leader pulled.
	// +optional
	ModuleDigest string `json:"moduleDigest,omitempty"`
	// CacheKey locates the precompiled, signed module in the shared cache.
	// +optional
	CacheKey string `json:"cacheKey,omitempty"`
	// VerifiedSignatures is the fingerprint of the PolicyServer's verificationConfig the
	// module's signatures were verified against when the leader initialized it; empty when no
	// verification was configured. A replica with a verificationConfig serves only revisions
	// verified against its own, so a module loaded before the configuration changed is checked
	// again rather than served unverified.
	// +optional
	VerifiedSignatures string `json:"verifiedSignatures,omitempty"`
	// PreparationAttempts counts the leader's attempts to prepare this revision that began
	// and reported no outcome. The leader records an attempt before it starts and clears the
	// count with the outcome, so a module that crashes or OOM-kills its preparer leaves it
	// raised; past the policy server's bound the revision is given up (Initialized False,
	// reason PreparationAbandoned) instead of crash-looping every leader in turn.
	// +optional
	// +kubebuilder:validation:Minimum=0
	PreparationAttempts int32 `json:"preparationAttempts,omitempty"`
	// Conditions are the controller's Scheduled and the leader's Initialized.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []PolicyCondition `json:"conditions,omitempty"`
	// Replicas are each replica's report: whether it loaded this revision.
	// +listType=map
	// +listMapKey=replica
	// +optional
	Replicas []ReplicaStatus `json:"replicas,omitempty"`
}

// PolicyRevision is one generation of an admission policy, pulled, precompiled, validated and
// signed by the policy server's leader and loaded by every replica.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=polrev
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=".spec.objectReference.name"
// +kubebuilder:printcolumn:name="Generation",type=integer,JSONPath=".spec.policyGeneration"
// +kubebuilder:printcolumn:name="Enabled",type=boolean,JSONPath=".spec.enabled"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type PolicyRevision struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PolicyRevisionSpec   `json:"spec"`
	Status PolicyRevisionStatus `json:"status,omitempty"`
}

// PolicyRevisionList is a list of PolicyRevisions.
// +kubebuilder:object:root=true
type PolicyRevisionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicyRevision `json:"items"`
}

func init() { SchemeBuilder.Register(&PolicyRevision{}, &PolicyRevisionList{}) }
