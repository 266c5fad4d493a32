package admissionpolicy

import (
	"testing"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

func TestWebhookFor_AdmissionPolicySeesOnlyItsNamespace(t *testing.T) {
	ref := kubewardenv1.PolicyReference{Kind: kubewardenv1.KindAdmissionPolicy, Namespace: "team-a", Name: "no-latest"}
	w := webhookFor(ref, kubewardenv1.PolicySpec{}, 4, webhookTarget{Namespace: "regent-system", Service: "regent-policy-server-default"}).validating()
	if got := w.NamespaceSelector.MatchLabels[namespaceNameLabel]; got != "team-a" {
		t.Errorf("namespace selector label = %q, want team-a", got)
	}
	if s := w.ClientConfig.Service; s == nil || *s.Path != "/validate/namespaced-team-a-no-latest/4" || *s.Port != ServicePort {
		t.Errorf("service = %+v, want path /validate/namespaced-team-a-no-latest/4 on %d", s, ServicePort)
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
