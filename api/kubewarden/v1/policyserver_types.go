package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// PolicyServerSecurity is the securityContexts of Kubewarden's PolicyServer: the policy server
// container's and its pod's. A field the user sets replaces Regent's default for that field
// only; the rest keep Pod Security "restricted" (see the admission controller's pod builder).
type PolicyServerSecurity struct {
	// Container is the policy server container's securityContext.
	// +optional
	Container *corev1.SecurityContext `json:"container,omitempty"`
	// Pod is the policy server pod's securityContext.
	// +optional
	Pod *corev1.PodSecurityContext `json:"pod,omitempty"`
}

// PolicyServerSpec describes a policy server deployment. Its fields are Kubewarden's, with
// their JSON names and types, so a Kubewarden PolicyServer applies unchanged; the few Regent
// cannot honour yet are refused at apply time with a message saying why (never pruned), and
// Regent's own fields (keptRevisions, cache*) are marked as such.
// +kubebuilder:validation:XValidation:rule="!(has(self.minAvailable) && has(self.maxUnavailable))",message="minAvailable and maxUnavailable are exclusive, as in Kubewarden: the PodDisruptionBudget takes one of them; remove the other"
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

	// MinAvailable is the replicas (a number or a percentage) that must stay available during
	// a voluntary eviction: the PolicyServer gets a PodDisruptionBudget over its replicas, as in
	// Kubewarden. Not with maxUnavailable.
	// +kubebuilder:validation:XIntOrString
	// +optional
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`
	// MaxUnavailable is the replicas (a number or a percentage) a voluntary eviction may take
	// down at once, in the PodDisruptionBudget as minAvailable is. Not with minAvailable.
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// Annotations are added to the policy server pods (replicas and leader), as in Kubewarden.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// Labels are added to the policy server workloads and their pods, as in Kubewarden; the
	// labels Regent selects its pods by win over a user's label of the same key.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Env is added to the policy server container's environment. POD_IP is Regent's own (the
	// address replicas fetch cache entries from) and is not overridden.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// ImagePullSecret names a Secret of type kubernetes.io/dockerconfigjson in the policy
	// servers' namespace holding the credentials policy modules (registry://) are pulled with,
	// and policies' OCI host calls use, as in Kubewarden. It is not the pods' image pull secret.
	// +optional
	ImagePullSecret string `json:"imagePullSecret,omitempty"`
	// SecurityContexts of the policy server container and pod. A field set here replaces
	// Regent's default for that field; the others keep the defaults (non-root user 65532,
	// read-only root filesystem, no privilege escalation, all capabilities dropped,
	// RuntimeDefault seccomp).
	// +optional
	SecurityContexts *PolicyServerSecurity `json:"securityContexts,omitempty"`
	// Affinity of the policy server pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// Tolerations of the policy server pods.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// PriorityClassName of the policy server pods. If the PriorityClass is deleted, running pods
	// keep going but new ones cannot be created.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// MetricsPort is the port of the metrics Service (the pods keep listening on 9090), as in
	// Kubewarden where it changes only the Service's port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	MetricsPort *int32 `json:"metricsPort,omitempty"`

	// Kubewarden fields Regent cannot honour yet. Each is in the schema, so it is refused with
	// a message rather than pruned: dropping it would silently change what the user asked for.

	// WebhookPort is Kubewarden's listening port. Regent's policy server serves admission on
	// 8443, its Service's port; only that value is accepted.
	// +kubebuilder:validation:XValidation:rule="self == 8443",message="webhookPort: Regent's policy server serves admission on port 8443 only; remove webhookPort or set it to 8443"
	// +optional
	WebhookPort *int32 `json:"webhookPort,omitempty"`
	// ReadinessProbePort is Kubewarden's readiness port. Regent serves /readyz on the admission
	// port, 8443; only that value is accepted.
	// +kubebuilder:validation:XValidation:rule="self == 8443",message="readinessProbePort: Regent's policy server serves /readyz on its admission port 8443; remove readinessProbePort or set it to 8443"
	// +optional
	ReadinessProbePort *int32 `json:"readinessProbePort,omitempty"`
	// InsecureSources is refused: Regent has no per-registry exception to TLS verification.
	// +kubebuilder:validation:XValidation:rule="size(self) == 0",message="insecureSources is not supported: Regent's policy server has no per-registry exception to TLS verification; serve the registry with a trusted certificate, or remove insecureSources"
	// +optional
	InsecureSources []string `json:"insecureSources,omitempty"`
	// SourceAuthorities is refused: Regent has no per-registry certificate authorities.
	// +kubebuilder:validation:XValidation:rule="size(self) == 0",message="sourceAuthorities is not supported: Regent's policy server cannot trust a certificate authority for one registry only; remove sourceAuthorities"
	// +optional
	SourceAuthorities map[string][]string `json:"sourceAuthorities,omitempty"`
	// VerificationConfig names a ConfigMap in the policy server's namespace whose key
	// verification-config is Kubewarden's verification configuration (allOf/anyOf of pubKey,
	// genericIssuer and githubAction requirements, with annotations): only registry modules
	// whose cosign signatures meet it are loaded, and a module that fails says why on its
	// revision and policy (Initialized, reason UntrustedModule). Keyless requirements
	// (genericIssuer, githubAction) are checked against sigstoreTrustConfig; without one, every
	// module is refused with that reason. Editing the ConfigMap rolls the policy server's pods.
	// +optional
	VerificationConfig string `json:"verificationConfig,omitempty"`
	// SigstoreTrustConfig names a ConfigMap in the policy server's namespace whose key
	// sigstore-trust-config is a Sigstore ClientTrustConfig JSON (or a bare trusted_root.json):
	// the Fulcio certificate authorities and Rekor logs keyless signatures are checked against,
	// for verificationConfig and for policies' oci verify host calls. Regent does not fetch the
	// public-good Sigstore root over the internet: without this, keyless verification is
	// refused. Anyone who can write the ConfigMap decides which signatures are trusted: restrict
	// it with RBAC. Editing the ConfigMap rolls the policy server's pods.
	// +optional
	SigstoreTrustConfig string `json:"sigstoreTrustConfig,omitempty"`
	// NamespacedPoliciesCapabilities is refused: Regent cannot restrict host capabilities of
	// namespaced policies per PolicyServer.
	// +kubebuilder:validation:XValidation:rule="size(self) == 0",message="namespacedPoliciesCapabilities is not supported: Regent cannot restrict the host capabilities of namespaced policies per PolicyServer; remove namespacedPoliciesCapabilities"
	// +optional
	NamespacedPoliciesCapabilities []string `json:"namespacedPoliciesCapabilities,omitempty"`
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
