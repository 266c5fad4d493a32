package propagator

import (
	"encoding/json"
	"strings"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// enforces says whether a spec changes its managed cluster. A policy's own remediationAction,
// when set, overrides that of its OCM-kind templates on the managed cluster, so it decides alone;
// without one, the templates' own remediationAction applies, and one that enforces makes the
// policy enforce. That is also why the inform version a progressive rollout hands out first (the
// policy set to inform) informs whatever its templates say.
func enforces(spec *policyv1.PolicySpec) bool {
	if spec.RemediationAction != "" {
		return strings.EqualFold(string(spec.RemediationAction), string(policyv1.Enforce))
	}
	for _, t := range spec.PolicyTemplates {
		if t != nil && templateEnforces(t.ObjectDefinition.Raw) {
			return true
		}
	}
	return false
}

// templateEnforces reads the remediationAction of a template of one of OCM's policy kinds, the
// only kinds the policy's remediationAction overrides on the managed cluster.
func templateEnforces(raw []byte) bool {
	var obj struct {
		APIVersion string `json:"apiVersion"`
		Spec       struct {
			RemediationAction string `json:"remediationAction"`
		} `json:"spec"`
	}
	if json.Unmarshal(raw, &obj) != nil {
		return false
	}
	group, _, _ := strings.Cut(obj.APIVersion, "/")
	return group == policyv1.GroupVersion.Group &&
		strings.EqualFold(obj.Spec.RemediationAction, string(policyv1.Enforce))
}
