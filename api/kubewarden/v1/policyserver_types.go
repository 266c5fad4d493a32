package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyServerSpec describes a policy server deployment.
type PolicyServerSpec struct {
	// Image runs `regent policy-server`.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`
	// Replicas of the StatefulSet.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=1
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// KeptRevisions is how many revisions of each policy are kept for rollback.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=3
	// +optional
	KeptRevisions int32 `json:"keptRevisions,omitempty"`
	// ServiceAccountName runs the policy server pods.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// CacheStorageClassName (a Regent field) provisions the signed module cache on volumes of
	// this class: one ReadWriteOnce claim per replica, or with cacheAccessMode ReadWriteMany
	// one claim every replica shares. Unset, each replica keeps its cache in an emptyDir and
	// fetches what it lacks from the leader when its pod is replaced.
	// +optional
	CacheStorageClassName *string `json:"cacheStorageClassName,omitempty"`
	// CacheAccessMode (a Regent field) is ReadWriteOnce, the default: every replica keeps its
	// own signed cache and fetches the leader's entries over TLS, verifying them. ReadWriteMany
	// shares one claim (of cacheStorageClassName, or the cluster's default class) between the
	// replicas: the leader publishes there and no replica fetches.
	// +kubebuilder:validation:Enum=ReadWriteOnce;ReadWriteMany
	// +optional
	CacheAccessMode corev1.PersistentVolumeAccessMode `json:"cacheAccessMode,omitempty"`
	// Limits caps the policy server container's compute resources, as in Kubewarden. A
	// resource named in neither limits nor requests gets Regent's default (cpu 2, memory
	// 1Gi); one with only a request here gets no default limit below that request.
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// Requests reserves the policy server container's compute resources, as in Kubewarden. A
	// resource named in neither requests nor limits gets Regent's default (cpu 250m, memory
	// 256Mi); one with only a limit here requests that limit (Kubernetes' own defaulting).
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// PolicyServerStatus is what the controller observed.
type PolicyServerStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PolicyServer is a group of policy-server replicas serving the policies that name it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ps
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=".spec.image"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type PolicyServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PolicyServerSpec   `json:"spec"`
	Status PolicyServerStatus `json:"status,omitempty"`
}

// PolicyServerList is a list of PolicyServers.
// +kubebuilder:object:root=true
type PolicyServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicyServer `json:"items"`
}

func init() { SchemeBuilder.Register(&PolicyServer{}, &PolicyServerList{}) }
