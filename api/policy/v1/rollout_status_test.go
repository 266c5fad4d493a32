package v1_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// A replica's rollout status is the one the hub wrote for its current generation, else the one
// its spec and its report on that generation imply.
func TestEffectiveRolloutStatus_WrittenForTheGenerationElseImplied(t *testing.T) {
	progressive := &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup}
	rollout := func(status policyv1.RolloutStatus, generation int64) policyv1.PolicyStatus {
		s := policyv1.PolicyStatus{RolloutStatus: status}
		if generation >= 0 {
			s.Conditions = []metav1.Condition{{Type: policyv1.RolloutConditionType, Reason: string(status), ObservedGeneration: generation}}
		}
		return s
	}
	reported := func(s policyv1.PolicyStatus, c policyv1.ComplianceState, generation int64) policyv1.PolicyStatus {
		s.ComplianceState, s.LastEvaluatedGeneration = c, generation
		return s
	}
	for _, tc := range []struct {
		name     string
		action   policyv1.RemediationAction
		strategy *clusterv1alpha1.RolloutStrategy
		status   policyv1.PolicyStatus
		want     policyv1.RolloutStatus
	}{
		{"a progressive rollout's inform version waits for its turn", policyv1.Inform, progressive, policyv1.PolicyStatus{}, policyv1.RolloutToApply},
		{"waiting whatever it reports on its inform version", policyv1.Inform, progressive, reported(policyv1.PolicyStatus{}, policyv1.Compliant, 2), policyv1.RolloutToApply},
		{"enforced and not reported yet is Progressing", policyv1.Enforce, progressive, policyv1.PolicyStatus{}, policyv1.RolloutProgressing},
		{"Compliant at its generation is Succeeded", policyv1.Enforce, progressive, reported(policyv1.PolicyStatus{}, policyv1.Compliant, 2), policyv1.RolloutSucceeded},
		{"NonCompliant at its generation is Failed", policyv1.Enforce, nil, reported(policyv1.PolicyStatus{}, policyv1.NonCompliant, 2), policyv1.RolloutFailed},
		{"Pending at its generation is still Progressing", policyv1.Enforce, nil, reported(policyv1.PolicyStatus{}, policyv1.Pending, 2), policyv1.RolloutProgressing},
		{"a report on an earlier generation is no report", policyv1.Enforce, progressive, reported(policyv1.PolicyStatus{}, policyv1.Compliant, 1), policyv1.RolloutProgressing},
		{"an inform root without progressive strategy is not waiting", policyv1.Inform, nil, policyv1.PolicyStatus{}, policyv1.RolloutProgressing},
		{"written for its generation", policyv1.Enforce, progressive, rollout(policyv1.RolloutTimeOut, 2), policyv1.RolloutTimeOut},
		{"written for its generation over what it implies", policyv1.Inform, nil, reported(rollout(policyv1.RolloutSucceeded, 2), policyv1.NonCompliant, 2), policyv1.RolloutSucceeded},
		{"written for an earlier generation is stale", policyv1.Inform, progressive, reported(rollout(policyv1.RolloutSucceeded, 1), policyv1.Compliant, 1), policyv1.RolloutToApply},
		{"written without a generation counts as current", policyv1.Inform, progressive, rollout(policyv1.RolloutSucceeded, 0), policyv1.RolloutSucceeded},
		{"written without a condition counts as current", policyv1.Enforce, progressive, rollout(policyv1.RolloutFailed, -1), policyv1.RolloutFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Generation: 2},
				Spec: policyv1.PolicySpec{RemediationAction: tc.action, RolloutStrategy: tc.strategy}, Status: tc.status}
			if got := p.EffectiveRolloutStatus(); got != tc.want {
				t.Errorf("EffectiveRolloutStatus() = %s, want %s", got, tc.want)
			}
		})
	}
}
