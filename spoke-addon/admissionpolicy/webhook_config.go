package admissionpolicy

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// Labels and annotations the controller puts on what it creates.
const (
	// PolicyLabel names the policy (PolicyReference.LabelValue) on its revisions and webhook
	// configurations.
	PolicyLabel = "regent.dev/policy"
	// policyRefAnnotation on a webhook configuration names its policy as kind/namespace/name: the
	// server policy name alone cannot be split back (namespaces and names both hold dashes).
	policyRefAnnotation = "regent.dev/policy-ref"
	// ServicePort is where the policy server's Service listens.
	ServicePort = 8443
	// namespaceNameLabel is set by the apiserver on every namespace.
	namespaceNameLabel = "kubernetes.io/metadata.name"
)

// webhookTarget is where the apiserver reaches a policy server.
type webhookTarget struct {
	// BaseURL, when set, is used instead of the Service (a local fleet's process).
	BaseURL string
	// Namespace and Service locate the in-cluster Service otherwise.
	Namespace, Service string
	CABundle           []byte
}

// webhookName names a policy's webhook configurations (both kinds) after its server policy name,
// hashed when too long; distinct policies get distinct names (see ServerPolicyName).
func webhookName(policyName string) string {
	return kubewardenv1.FitName("regent-"+policyName, kubewardenv1.MaxObjectName)
}

// webhookSuffix makes the webhook's name in its configuration a fully qualified name.
const webhookSuffix = ".policies.regent.dev"

// validatePath is the policy server's endpoint for one generation of one policy.
func validatePath(policyName string, generation int64) string {
	return fmt.Sprintf("/validate/%s/%d", policyName, generation)
}

// policyRef renders a reference for policyRefAnnotation.
func policyRef(ref kubewardenv1.PolicyReference) string {
	return ref.Kind + "/" + ref.Namespace + "/" + ref.Name
}

// parsePolicyRef reverses policyRef.
func parsePolicyRef(s string) (kind, namespace, name string, ok bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// webhookFor builds the webhook that sends the policy's requests to generation of its policy
// server. An AdmissionPolicy sees only its own namespace, whatever its selector says; a
// ClusterAdmissionPolicy does not see the controller's namespace unless it allows itself in, as
// in Kubewarden, so no policy can keep the policy servers from starting.
func webhookFor(ref kubewardenv1.PolicyReference, spec kubewardenv1.PolicySpec, generation int64, target webhookTarget) webhookParts {
	path := validatePath(ref.ServerPolicyName(), generation)
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: target.CABundle}
	if target.BaseURL != "" {
		u := strings.TrimSuffix(target.BaseURL, "/") + path
		cc.URL = &u
	} else {
		cc.Service = &admissionregistrationv1.ServiceReference{
			Namespace: target.Namespace, Name: target.Service, Path: &path, Port: ptrTo(int32(ServicePort)),
		}
	}
	rules := spec.Rules
	nsSelector := spec.NamespaceSelector.DeepCopy()
	if namespacedKind(ref.Kind) {
		rules = namespacedOnly(rules)
		if nsSelector == nil {
			nsSelector = &metav1.LabelSelector{}
		}
		if nsSelector.MatchLabels == nil {
			nsSelector.MatchLabels = map[string]string{}
		}
		nsSelector.MatchLabels[namespaceNameLabel] = ref.Namespace
	}
	if nsSelector == nil {
		nsSelector = &metav1.LabelSelector{}
	}
	if !namespacedKind(ref.Kind) && !spec.AllowInsideAdmissionControllerNamespace && target.Namespace != "" {
		nsSelector.MatchExpressions = append([]metav1.LabelSelectorRequirement{{
			Key: namespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{target.Namespace},
		}}, nsSelector.MatchExpressions...)
	}
	objSelector := spec.ObjectSelector.DeepCopy()
	if objSelector == nil {
		objSelector = &metav1.LabelSelector{}
	}
	failure := admissionregistrationv1.Fail
	if spec.FailurePolicy != nil {
		failure = *spec.FailurePolicy
	}
	timeout := int32(10)
	if spec.TimeoutSeconds != nil {
		timeout = *spec.TimeoutSeconds
	}
	matchPolicy := admissionregistrationv1.Equivalent
	if spec.MatchPolicy != nil {
		matchPolicy = *spec.MatchPolicy
	}
	sideEffects := admissionregistrationv1.SideEffectClassNone
	if spec.SideEffects != nil {
		sideEffects = *spec.SideEffects
	}
	return webhookParts{
		name:              kubewardenv1.FitName(ref.ServerPolicyName(), kubewardenv1.MaxObjectName-len(webhookSuffix)) + webhookSuffix,
		clientConfig:      cc,
		rules:             rules,
		namespaceSelector: nsSelector,
		objectSelector:    objSelector,
		failurePolicy:     failure,
		timeoutSeconds:    timeout,
		matchPolicy:       matchPolicy,
		sideEffects:       sideEffects,
		// Dropping them would send the policy requests its author excluded.
		matchConditions: slices.Clone(spec.MatchConditions),
	}
}

// namespacedOnly copies rules with scope Namespaced on each: the apiserver sends a webhook every
// cluster-scoped object its rules match whatever its namespaceSelector says, so an AdmissionPolicy
// rule of scope Cluster, "*" or unset (which defaults to "*") would reach beyond its namespace.
// The CRD refuses Cluster and "*"; this also covers an unset scope and objects stored before.
func namespacedOnly(rules []admissionregistrationv1.RuleWithOperations) []admissionregistrationv1.RuleWithOperations {
	out := make([]admissionregistrationv1.RuleWithOperations, len(rules))
	for i := range rules {
		rules[i].DeepCopyInto(&out[i])
		out[i].Scope = ptrTo(admissionregistrationv1.NamespacedScope)
	}
	return out
}

// webhookParts is what the validating and mutating webhooks share.
type webhookParts struct {
	name              string
	clientConfig      admissionregistrationv1.WebhookClientConfig
	rules             []admissionregistrationv1.RuleWithOperations
	namespaceSelector *metav1.LabelSelector
	objectSelector    *metav1.LabelSelector
	failurePolicy     admissionregistrationv1.FailurePolicyType
	timeoutSeconds    int32
	matchPolicy       admissionregistrationv1.MatchPolicyType
	sideEffects       admissionregistrationv1.SideEffectClass
	matchConditions   []admissionregistrationv1.MatchCondition
}

func (p webhookParts) validating() admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name: p.name, ClientConfig: p.clientConfig, Rules: p.rules,
		NamespaceSelector: p.namespaceSelector, ObjectSelector: p.objectSelector,
		FailurePolicy: ptrTo(p.failurePolicy), TimeoutSeconds: ptrTo(p.timeoutSeconds),
		MatchPolicy: ptrTo(p.matchPolicy), SideEffects: ptrTo(p.sideEffects), AdmissionReviewVersions: []string{"v1"},
		MatchConditions: p.matchConditions,
	}
}

func (p webhookParts) mutating() admissionregistrationv1.MutatingWebhook {
	never := admissionregistrationv1.NeverReinvocationPolicy
	return admissionregistrationv1.MutatingWebhook{
		Name: p.name, ClientConfig: p.clientConfig, Rules: p.rules,
		NamespaceSelector: p.namespaceSelector, ObjectSelector: p.objectSelector,
		FailurePolicy: ptrTo(p.failurePolicy), TimeoutSeconds: ptrTo(p.timeoutSeconds),
		MatchPolicy: ptrTo(p.matchPolicy), SideEffects: ptrTo(p.sideEffects), AdmissionReviewVersions: []string{"v1"},
		ReinvocationPolicy: &never, MatchConditions: p.matchConditions,
	}
}
