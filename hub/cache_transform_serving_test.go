package hub

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// A replica in the hub's cache keeps, of its details, an admission policy's serving line only.
func TestTrimPolicy_KeepsOnlyTheServingLineOfAdmissionTemplates(t *testing.T) {
	replica := &policyv1.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: "ns.p", Namespace: "c1", Labels: map[string]string{"policy.open-cluster-management.io/root-policy": "ns.p"}},
		Status: policyv1.PolicyStatus{Details: []*policyv1.DetailsPerTemplate{
			{TemplateMeta: metav1.ObjectMeta{Name: "cfg"}, ComplianceState: policyv1.NonCompliant,
				History: []policyv1.ComplianceHistory{{Message: "NonCompliant; configmaps [a] not found"}}},
			{TemplateMeta: metav1.ObjectMeta{Name: "psp", Labels: map[string]string{"x": "y"}}, ComplianceState: policyv1.Compliant,
				History: []policyv1.ComplianceHistory{
					{Message: "Compliant; ClusterAdmissionPolicy psp is Active, serving generation 3 of 3; Ready=True; Ready on replica 0=True"},
					{Message: "NonCompliant; ClusterAdmissionPolicy psp is Pending, serving generation 2 of 3"},
				}},
		}},
	}
	if _, err := trimPolicy(replica); err != nil {
		t.Fatal(err)
	}
	d := replica.Status.Details
	if len(d) != 1 || d[0].TemplateMeta.Name != "psp" || d[0].TemplateMeta.Labels != nil || len(d[0].History) != 1 ||
		d[0].History[0].Message != "ClusterAdmissionPolicy psp is Active, serving generation 3 of 3" {
		t.Fatalf("details kept: %+v", d)
	}
}
