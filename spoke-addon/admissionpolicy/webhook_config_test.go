package admissionpolicy

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

func TestWebhookFor_AdmissionPolicySeesOnlyItsNamespace(t *testing.T) {
	ref := kubewardenv1.PolicyReference{Kind: kubewardenv1.KindAdmissionPolicy, Namespace: "team-a", Name: "no-latest"}
	w := webhookFor(ref, kubewardenv1.PolicySpec{}, 4, webhookTarget{Namespace: "regent-system", Service: "regent-policy-server-default"}).validating()
	if got := w.NamespaceSelector.MatchLabels[namespaceNameLabel]; got != "team-a" {
		t.Errorf("namespace selector label = %q, want team-a", got)
	}
	if s := w.ClientConfig.Service; s == nil || *s.Path != "/validate/namespaced.team-a.no-latest/4" || *s.Port != ServicePort {
		t.Errorf("service = %+v, want path /validate/namespaced.team-a.no-latest/4 on %d", s, ServicePort)
	}
}

func TestWebhookFor_BaseURLReplacesTheService(t *testing.T) {
	ref := kubewardenv1.PolicyReference{Kind: kubewardenv1.KindClusterAdmissionPolicy, Name: "psp"}
	w := webhookFor(ref, kubewardenv1.PolicySpec{}, 7, webhookTarget{BaseURL: "https://127.0.0.1:9443/"}).mutating()
	if w.ClientConfig.URL == nil || *w.ClientConfig.URL != "https://127.0.0.1:9443/validate/clusterwide-psp/7" || w.ClientConfig.Service != nil {
		t.Errorf("client config = %+v", w.ClientConfig)
	}
	if len(w.NamespaceSelector.MatchLabels) != 0 {
		t.Errorf("a cluster-wide policy got a namespace selector: %v", w.NamespaceSelector)
	}
}

func TestRollbackTarget_UnknownGenerationNamesKeptOnes(t *testing.T) {
	revs := []revisionState{rev(4), rev(2), rev(3)}
	if r, _ := rollbackTarget("3", revs); r == nil || r.Generation != 3 {
		t.Fatalf("target = %v, want generation 3", r)
	}
	_, cond := rollbackTarget("1", revs)
	if cond.Reason != "UnknownGeneration" || cond.Message != "generation 1 is not kept; kept generations: 2, 3, 4" {
		t.Errorf("condition = %+v", cond)
	}
	if _, cond := rollbackTarget("x", revs); cond.Reason != "InvalidGeneration" {
		t.Errorf("condition = %+v", cond)
	}
}

func TestWebhookFor_AdmissionPolicyRulesAreNamespacedOnly(t *testing.T) {
	cluster := admissionregistrationv1.ClusterScope
	rule := admissionregistrationv1.RuleWithOperations{Rule: admissionregistrationv1.Rule{
		APIGroups: []string{"rbac.authorization.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"clusterrolebindings"}}}
	scoped := rule
	scoped.Scope = &cluster
	spec := kubewardenv1.PolicySpec{Rules: []admissionregistrationv1.RuleWithOperations{rule, scoped}}
	tenant := kubewardenv1.PolicyReference{Kind: kubewardenv1.KindAdmissionPolicy, Namespace: "team-a", Name: "p"}
	for i, r := range webhookFor(tenant, spec, 1, webhookTarget{BaseURL: "https://x"}).mutating().Rules {
		if r.Scope == nil || *r.Scope != admissionregistrationv1.NamespacedScope {
			t.Errorf("rule %d of an AdmissionPolicy has scope %v, want Namespaced", i, r.Scope)
		}
	}
	if spec.Rules[1].Scope != &cluster || spec.Rules[0].Scope != nil {
		t.Errorf("the policy's own rules were changed")
	}
	admin := kubewardenv1.PolicyReference{Kind: kubewardenv1.KindClusterAdmissionPolicy, Name: "p"}
	if r := webhookFor(admin, spec, 1, webhookTarget{BaseURL: "https://x"}).validating().Rules; r[1].Scope != &cluster || r[0].Scope != nil {
		t.Errorf("a ClusterAdmissionPolicy's scopes were changed: %+v", r)
	}
}

func TestWebhookOwner_OnlyTheSamePolicyReferenceOwns(t *testing.T) {
	ref := kubewardenv1.PolicyReference{Kind: kubewardenv1.KindAdmissionPolicy, Namespace: "a", Name: "b-c", UID: "1"}
	for annotation, want := range map[string]string{
		"AdmissionPolicy/a/b-c":       "",
		"AdmissionPolicy/a-b/c":       "AdmissionPolicy a-b/c",
		"ClusterAdmissionPolicy//b-c": "ClusterAdmissionPolicy b-c",
		"":                            "no Regent policy",
		"AdmissionPolicy/a/b-c/extra": "no Regent policy",
	} {
		meta := &metav1.ObjectMeta{Name: "w", Annotations: map[string]string{policyRefAnnotation: annotation}}
		got := webhookOwner(meta, "ValidatingWebhookConfiguration", ref)
		if (got == nil) != (want == "") || (got != nil && got.owner != want) {
			t.Errorf("annotation %q: conflict %+v, want owner %q", annotation, got, want)
		}
	}
}

// As in Kubewarden, a ClusterAdmissionPolicy's webhook leaves out the controller's namespace
// unless the policy allows itself in; the policy's own selector is kept either way.
func TestWebhookFor_ControllerNamespaceExcludedUnlessAllowed(t *testing.T) {
	ref := kubewardenv1.PolicyReference{Kind: kubewardenv1.KindClusterAdmissionPolicy, Name: "p"}
	own := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	target := webhookTarget{Namespace: "regent-system", Service: "s"}
	w := webhookFor(ref, kubewardenv1.PolicySpec{NamespaceSelector: own}, 1, target).validating()
	exprs := w.NamespaceSelector.MatchExpressions
	if len(exprs) != 1 || exprs[0].Key != namespaceNameLabel || exprs[0].Operator != metav1.LabelSelectorOpNotIn ||
		exprs[0].Values[0] != "regent-system" || w.NamespaceSelector.MatchLabels["env"] != "prod" {
		t.Errorf("namespaceSelector = %+v, want regent-system excluded and env=prod kept", w.NamespaceSelector)
	}
	if len(own.MatchExpressions) != 0 {
		t.Error("the policy's own selector was changed")
	}
	w = webhookFor(ref, kubewardenv1.PolicySpec{NamespaceSelector: own, AllowInsideAdmissionControllerNamespace: true}, 1, target).validating()
	if len(w.NamespaceSelector.MatchExpressions) != 0 {
		t.Errorf("namespaceSelector = %+v, want the policy's own selector only", w.NamespaceSelector)
	}
}
