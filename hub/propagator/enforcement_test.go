package propagator

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	policyv1 "regent.dev/regent/api/policy/v1"
)

func TestEnforces_ThePolicysActionOverridesItsOCMTemplates(t *testing.T) {
	cfg := func(action string) *policyv1.PolicyTemplate {
		return &policyv1.PolicyTemplate{ObjectDefinition: runtime.RawExtension{Raw: []byte(
			`{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"c"},"spec":{"remediationAction":"` + action + `"}}`)}}
	}
	admission := &policyv1.PolicyTemplate{ObjectDefinition: runtime.RawExtension{Raw: []byte(
		`{"apiVersion":"policies.kubewarden.io/v1","kind":"ClusterAdmissionPolicy","metadata":{"name":"a"},"spec":{"remediationAction":"enforce","mode":"protect"}}`)}}
	tests := []struct {
		name      string
		action    policyv1.RemediationAction
		templates []*policyv1.PolicyTemplate
		want      bool
	}{
		{"policy enforce", policyv1.Enforce, []*policyv1.PolicyTemplate{cfg("inform")}, true},
		{"policy Enforce, OCM's other spelling", "Enforce", nil, true},
		{"policy inform overrides an enforcing template", policyv1.Inform, []*policyv1.PolicyTemplate{cfg("enforce")}, false},
		{"no policy action: an enforcing template enforces", "", []*policyv1.PolicyTemplate{cfg("inform"), cfg("Enforce")}, true},
		{"no policy action: informing templates inform", "", []*policyv1.PolicyTemplate{cfg("inform")}, false},
		{"no policy action: a kind the policy's action does not reach is not read", "", []*policyv1.PolicyTemplate{admission}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &policyv1.PolicySpec{RemediationAction: tt.action, PolicyTemplates: tt.templates}
			if got := enforces(spec); got != tt.want {
				t.Fatalf("enforces = %v, want %v", got, tt.want)
			}
		})
	}
}
