package hub

import (
	"testing"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

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

func TestTrimPolicy_ReplacesAReplicaSpecByItsHash(t *testing.T) {
	spec := func(tmpl string, action policyv1.RemediationAction) policyv1.PolicySpec {
		return policyv1.PolicySpec{RemediationAction: action, PolicyTemplates: []*policyv1.PolicyTemplate{
			{ObjectDefinition: runtime.RawExtension{Raw: []byte(tmpl)}}}}
	}
	replica := func(s policyv1.PolicySpec) *policyv1.Policy {
		p := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{propagator.RootPolicyLabel: "ns.p"}}, Spec: s}
		if _, err := trimPolicy(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	want := spec(`{"kind":"ConfigurationPolicy","apiVersion":"v1","metadata":{"name":"a"}}`, policyv1.Inform)
	same := replica(spec(`{"apiVersion": "v1", "kind": "ConfigurationPolicy", "metadata": {"name": "a"}}`, policyv1.Inform))
	if same.Spec.PolicyTemplates != nil {
		t.Errorf("cached replica keeps its templates")
	}
	if same.Spec.RemediationAction != policyv1.Inform {
		t.Errorf("cached replica lost its remediation action: %q", same.Spec.RemediationAction)
	}
	if same.GenerateName != propagator.SpecHash(&want) {
		t.Errorf("same spec, other key order: hash %q, want %q", same.GenerateName, propagator.SpecHash(&want))
	}
	for name, edited := range map[string]policyv1.PolicySpec{
		"remediation": spec(`{"kind":"ConfigurationPolicy","apiVersion":"v1","metadata":{"name":"a"}}`, policyv1.Enforce),
		"template":    spec(`{"kind":"ConfigurationPolicy","apiVersion":"v1","metadata":{"name":"b"}}`, policyv1.Inform),
	} {
		if got := replica(edited).GenerateName; got == same.GenerateName {
			t.Errorf("%s edited: same hash %q", name, got)
		}
	}
	root := &policyv1.Policy{Spec: want}
	if _, err := trimPolicy(root); err != nil {
		t.Fatal(err)
	}
	if root.Spec.PolicyTemplates == nil || root.GenerateName != "" {
		t.Errorf("a root's spec must stay whole")
	}
}

func TestTrimPolicy_IsIdempotent(t *testing.T) {
	p := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{propagator.RootPolicyLabel: "ns.p"}},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Inform}}
	if _, err := trimPolicy(p); err != nil {
		t.Fatal(err)
	}
	first := p.GenerateName
	// client-go may pass an object it already transformed through the transform again.
	if _, err := trimPolicy(p); err != nil {
		t.Fatal(err)
	}
	if p.GenerateName != first {
		t.Errorf("second pass hashed the emptied spec: %q, was %q", p.GenerateName, first)
	}
}

func TestTrimReport_KeepsTheSummaryDropsTheWorstResults(t *testing.T) {
	r := &openreportsv1alpha1.Report{ObjectMeta: metav1.ObjectMeta{Name: "ns.p", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Summary: openreportsv1alpha1.ReportSummary{Pass: 2, Fail: 1},
		Results: []openreportsv1alpha1.ReportResult{{Policy: "p", Result: "fail"}}}
	if _, err := trimReport(r); err != nil {
		t.Fatal(err)
	}
	if r.Results != nil || r.ManagedFields != nil || r.Summary.Fail != 1 || r.Summary.Pass != 2 || r.Name != "ns.p" {
		t.Errorf("trimmed report %+v", r)
	}
}
