package lifecycle

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/registry"
	"regent.dev/regent/reports"
)

// Condition reasons written by the policy server.
const (
	ReasonInitialized = "Initialized"
	ReasonPullError   = "PullError"
	// ReasonUntrustedModule: the PolicyServer has a verificationConfig and the module's
	// signatures do not meet it (or it comes from where no signature can be); retried, since
	// a signature is often pushed after its module.
	ReasonUntrustedModule = "UntrustedModule"
	ReasonCompileError    = "CompileError"
	ReasonInvalidSettings = "InvalidSettings"
	ReasonSignError       = "SignError"
	// ReasonInitializedUnsigned: the module compiles and its settings are valid, but this
	// leader's identity may not read the signing key, so there is no signed entry; every
	// replica compiles the module itself.
	ReasonInitializedUnsigned = "InitializedUnsigned"
	// ReasonPreparationAbandoned: as many preparations as the bound began and never reported
	// an outcome (the leader crashed or was OOM-killed); the revision is not tried again.
	ReasonPreparationAbandoned = "PreparationAbandoned"
	ReasonLoaded               = "Loaded"
	ReasonSignatureInvalid     = "SignatureInvalid"
	// ReasonCompiledPrivately: the cache entry was refused (bad signature) and the replica
	// compiled the module itself; it serves it.
	ReasonCompiledPrivately = "CompiledPrivately"
	// ReasonCompiledLocally: no entry for this replica's version (an upgrade in progress); the
	// replica compiled the module itself and serves it.
	ReasonCompiledLocally = "CompiledLocally"
	ReasonLoadError       = "LoadError"
	// ReasonWaitingForLeader (Ready Unknown): the replica's own cache lacks the signed entry
	// and no leader could send it yet (one is being elected, or is still publishing it); the
	// load is retried, and after a wait the replica compiles the module itself.
	ReasonWaitingForLeader = "WaitingForLeader"
)

// revision is a PolicyRevision with its policy spec decoded.
type revision struct {
	*kubewardenv1.PolicyRevision
	// spec is the policy's spec; for a group, the fields it shares with a policy's.
	spec kubewardenv1.PolicySpec
	// group is the spec of a policy group's revision, nil for a policy's.
	group *kubewardenv1.PolicyGroupSpec
	key   registry.Key
}

func decodeRevision(r *kubewardenv1.PolicyRevision) (revision, error) {
	var spec kubewardenv1.PolicySpec
	if err := json.Unmarshal(r.Spec.Data.Raw, &spec); err != nil {
		return revision{}, fmt.Errorf("revision %s: data is not a policy spec: %w", r.Name, err)
	}
	rev := revision{
		PolicyRevision: r, spec: spec,
		key: registry.Key{Name: r.Spec.ObjectReference.ServerPolicyName(), Generation: r.Spec.PolicyGeneration},
	}
	if kubewardenv1.IsGroupKind(r.Spec.ObjectReference.Kind) {
		rev.group = &kubewardenv1.PolicyGroupSpec{}
		if err := json.Unmarshal(r.Spec.Data.Raw, rev.group); err != nil {
			return revision{}, fmt.Errorf("revision %s: data is not a policy group spec: %w", r.Name, err)
		}
	}
	return rev, nil
}

// initialized tells whether the leader has prepared this generation.
func (r revision) initialized() bool {
	c := findCondition(r.Status.Conditions, kubewardenv1.PolicyCondition{Type: kubewardenv1.ConditionInitialized})
	return c != nil && c.Status == metav1.ConditionTrue && c.PolicyGeneration == r.Spec.PolicyGeneration &&
		(r.Status.CacheKey != "" || c.Reason == ReasonInitializedUnsigned)
}

// leaderServiceAccount is the identity that may read a policy server's signing key (the
// controller creates it; see the signing package).
func leaderServiceAccount(policyServer string) string {
	return "regent-policy-server-" + policyServer + "-leader"
}

// policyConfig is what the server loads for this revision, with the module at modulePath.
func (r revision) policyConfig(modulePath, executionMode, entrypoint string) policyserver.PolicyConfig {
	pc := policyserver.PolicyConfig{
		Module: modulePath, ExecutionMode: executionMode, Entrypoint: entrypoint,
		Mode: policyserver.PolicyMode(r.spec.Mode), Mutating: r.spec.Mutating,
	}
	if r.spec.Settings != nil {
		pc.Settings = r.spec.Settings.Raw
	}
	if r.spec.TimeoutSeconds != nil {
		pc.TimeoutSeconds = int64(*r.spec.TimeoutSeconds)
	}
	if r.spec.TimeoutEvalSeconds != nil {
		// Kubewarden's evaluation bound; timeoutSeconds stays the apiserver's.
		pc.TimeoutSeconds = int64(*r.spec.TimeoutEvalSeconds)
	}
	pc.Message = r.spec.Message
	pc.ContextAwareResources = r.contextAwareResources()
	pc.AllowNetworkBuiltins = r.allowNetworkBuiltins()
	pc.ReportAdmission, pc.ReportAs = r.spec.ReportAdmission, r.reportAs()
	return pc
}

// reportAs is the policy the revision's admission answers are reported under: its own
// ClusterAdmissionPolicy or AdmissionPolicy, named as the user named it (the server's name for
// it, clusterwide-<name> or namespaced-<ns>-<name>, is not parsed back); a group as group/<name>,
// the name the background scan reports it under too.
func (r revision) reportAs() *reports.PolicyRef {
	ref := reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeCluster, Name: r.Spec.ObjectReference.ReportedName()}
	if k := r.Spec.ObjectReference.Kind; k == kubewardenv1.KindAdmissionPolicy || k == kubewardenv1.KindAdmissionPolicyGroup {
		ref.Scope = reportsv1alpha1.PolicyScopeNamespaced
	}
	return &ref
}

// allowNetworkBuiltins tells whether the revision's Rego may call network built-ins: only a
// ClusterAdmissionPolicy may ask. The AdmissionPolicy CRD refuses the field; this also covers
// data written before that rule, or by hand.
func (r revision) allowNetworkBuiltins() bool {
	return r.Spec.ObjectReference.Kind == kubewardenv1.KindClusterAdmissionPolicy && r.spec.AllowNetworkBuiltins
}

// contextAwareResources are the kinds the revision's policy may read. An AdmissionPolicy gets
// none, as in Kubewarden: namespace users write those, and must not read the cluster through
// the policy server. Its CRD refuses the field; this also covers data written before that rule.
func (r revision) contextAwareResources() []kubewardenv1.ContextAwareResource {
	if k := r.Spec.ObjectReference.Kind; k == kubewardenv1.KindAdmissionPolicy || k == kubewardenv1.KindAdmissionPolicyGroup {
		return nil
	}
	return r.spec.ContextAwareResources
}

func (r revision) condition(typ string, ok bool, reason, message string) kubewardenv1.PolicyCondition {
	return kubewardenv1.PolicyCondition{
		Type: typ, Status: conditionStatus(ok), Reason: reason, Message: truncate(message),
		PolicyGeneration: r.Spec.PolicyGeneration,
	}
}

// replicaStatus is replica n's report on the revision: whether it loaded it, and why not.
func (r revision) replicaStatus(n int32, ok bool, reason, message string) kubewardenv1.ReplicaStatus {
	return kubewardenv1.ReplicaStatus{
		Replica: n, Ready: conditionStatus(ok), Reason: reason, Message: truncate(message),
		PolicyGeneration: r.Spec.PolicyGeneration,
	}
}

func conditionStatus(ok bool) metav1.ConditionStatus {
	if ok {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

// truncate keeps a message readable in kubectl and within etcd's comfort.
func truncate(s string) string {
	const max = 4096
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
