package hub

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

func TestTrimPolicy_DropsReplicaHistoryButKeepsRootsWhole(t *testing.T) {
	details := []*policyv1.DetailsPerTemplate{{ComplianceState: policyv1.Compliant}}
	replica := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{propagator.RootPolicyLabel: "ns.p"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Status: policyv1.PolicyStatus{ComplianceState: policyv1.Compliant, LastEvaluatedGeneration: 3, Details: details}}
	root := &policyv1.Policy{Status: policyv1.PolicyStatus{Details: details}}
	if _, err := trimPolicy(replica); err != nil {
		t.Fatal(err)
	}
	if _, err := trimPolicy(root); err != nil {
		t.Fatal(err)
	}
	if replica.Status.Details != nil || replica.ManagedFields != nil {
		t.Errorf("replica keeps details %v, managed fields %v", replica.Status.Details, replica.ManagedFields)
	}
	if replica.Status.ComplianceState != policyv1.Compliant || replica.Status.LastEvaluatedGeneration != 3 {
		t.Errorf("replica lost what the rollout reads: %+v", replica.Status)
	}
	if root.Status.Details == nil {
		t.Errorf("a root's status must stay whole: the hub writes it back")
	}
}
