package status_test

import (
	"context"
	"strings"
	"testing"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/cli/status"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

// TestSpoke_ShowsPoliciesPendingDependenciesServingGenerationReplicasAndReports reads a managed
// cluster holding what the spoke addon and the policy server write, and prints it as the golden
// table says.
func TestSpoke_ShowsPoliciesPendingDependenciesServingGenerationReplicasAndReports(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(f.Managed[0].Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	now := metav1.Now()
	for _, ns := range []string{"apps", "cluster1"} {
		// The fleet may have made the cluster namespace already.
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	// Two replicas as spec sync writes them, their status as template sync reports it.
	tmpl := func(kind, name string) *policyv1.PolicyTemplate {
		return &policyv1.PolicyTemplate{ObjectDefinition: runtime.RawExtension{Raw: []byte(`{"apiVersion":"policy.open-cluster-management.io/v1","kind":"` + kind + `","metadata":{"name":"` + name + `"},"spec":{}}`)}}
	}
	for _, p := range []struct {
		name, template string
		state          policyv1.ComplianceState
		message        string
	}{
		{"default.base", "base-config", policyv1.Compliant, "notification - configmaps [base] found as specified"},
		{"default.require-labels", "require-labels", policyv1.Pending, "Dependencies were not satisfied: Policy default.base is NonCompliant, want Compliant; ConfigurationPolicy cluster1/quota is Pending, want Compliant"},
	} {
		obj := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: "cluster1"},
			Spec: policyv1.PolicySpec{RemediationAction: policyv1.Enforce, PolicyTemplates: []*policyv1.PolicyTemplate{tmpl("ConfigurationPolicy", p.template)}}}
		must(c.Create(ctx, obj))
		obj.Status = policyv1.PolicyStatus{ComplianceState: p.state, Details: []*policyv1.DetailsPerTemplate{{
			TemplateMeta: metav1.ObjectMeta{Name: p.template}, ComplianceState: p.state,
			History: []policyv1.ComplianceHistory{{LastTimestamp: now, Message: p.message}}}}}
		must(c.Status().Update(ctx, obj))
	}

	// An admission policy at generation 2 whose webhook still serves 1: replica 1 has not loaded 2.
	cap := &kubewardenv1.ClusterAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "no-privileged"},
		Spec: kubewardenv1.ClusterAdmissionPolicySpec{PolicySpec: kubewardenv1.PolicySpec{
			PolicyServer: "default", Module: "registry.example/policies/pod-privileged:v1", Mode: kubewardenv1.ModeProtect,
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}}}
	must(c.Create(ctx, cap))
	must(c.Get(ctx, client.ObjectKeyFromObject(cap), cap))
	cap.Spec.Module = "registry.example/policies/pod-privileged:v2"
	must(c.Update(ctx, cap))
	cap.Status = kubewardenv1.PolicyStatus{PolicyStatus: kubewardenv1.PolicyStatusActive, Phase: kubewardenv1.PhasePending, ServingGeneration: 1,
		Conditions: []metav1.Condition{{Type: kubewardenv1.ConditionPolicyActive, Status: metav1.ConditionFalse, Reason: "ReplicasNotReady",
			Message: "1 of 2 replicas serve generation 2", ObservedGeneration: 2, LastTransitionTime: now}},
		Replicas: []kubewardenv1.ReplicaStatus{{Replica: 1, PolicyGeneration: 2, Ready: metav1.ConditionFalse, LastTransitionTime: now},
			{Replica: 0, PolicyGeneration: 2, Ready: metav1.ConditionTrue, LastTransitionTime: now}}}
	must(c.Status().Update(ctx, cap))

	// A group of policies is an admission policy like the others, listed with its own kind.
	capg := &kubewardenv1.ClusterAdmissionPolicyGroup{ObjectMeta: metav1.ObjectMeta{Name: "pod-owners"},
		Spec: kubewardenv1.PolicyGroupSpec{PolicyServer: "default", Mode: kubewardenv1.ModeProtect,
			Policies:   map[string]kubewardenv1.PolicyGroupMember{"team": {Module: "registry.example/policies/team:v1"}},
			Expression: "team()", Message: "pods need a team",
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}}
	must(c.Create(ctx, capg))
	capg.Status = kubewardenv1.PolicyStatus{PolicyStatus: kubewardenv1.PolicyStatusActive, Phase: kubewardenv1.PhaseActive, ServingGeneration: 1,
		Conditions: []metav1.Condition{{Type: kubewardenv1.ConditionPolicyActive, Status: metav1.ConditionTrue, Reason: "Serving",
			Message: "every replica serves generation 1", ObservedGeneration: 1, LastTransitionTime: now}}}
	must(c.Status().Update(ctx, capg))

	for i, summary := range []openreportsv1alpha1.ReportSummary{{Pass: 3, Fail: 1}, {Pass: 2, Warn: 1, Skip: 1}} {
		must(c.Create(ctx, &openreportsv1alpha1.Report{ObjectMeta: metav1.ObjectMeta{Name: "pol-" + string(rune('a'+i)), Namespace: "apps"}, Summary: summary}))
	}
	must(c.Create(ctx, &openreportsv1alpha1.ClusterReport{ObjectMeta: metav1.ObjectMeta{Name: "cpol-no-privileged"}, Summary: openreportsv1alpha1.ReportSummary{Fail: 2, Error: 1}}))

	s, err := status.ReadSpoke(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Policies) != 2 || strings.Join(s.Policies[1].Pending, "|") != "ConfigurationPolicy cluster1/quota is Pending, want Compliant|Policy default.base is NonCompliant, want Compliant" {
		t.Errorf("policies %+v, want require-labels pending on both named dependencies", s.Policies)
	}
	if len(s.Admission) != 2 || s.Admission[0].Generation != 2 || s.Admission[0].Serving != 1 || s.Admission[0].Active != metav1.ConditionFalse ||
		len(s.Admission[0].Replicas) != 2 || s.Admission[0].Replicas[0].Replica != 0 {
		t.Errorf("admission %+v, want generation 2 serving 1, PolicyActive False, replicas 0 and 1 in order", s.Admission)
	}
	if len(s.Admission) == 2 && (s.Admission[1].Kind != "ClusterAdmissionPolicyGroup" || s.Admission[1].Name != "pod-owners" || s.Admission[1].Active != metav1.ConditionTrue) {
		t.Errorf("admission %+v, want the group pod-owners listed as a ClusterAdmissionPolicyGroup, PolicyActive True", s.Admission[1])
	}
	if s.Reports.Reports != 3 || s.Reports.Pass != 5 || s.Reports.Fail != 3 || s.Reports.Warn != 1 || s.Reports.Error != 1 || s.Reports.Skip != 1 {
		t.Errorf("reports %+v, want 3 reports summing pass 5, fail 3, warn 1, error 1, skip 1", s.Reports)
	}
	var b strings.Builder
	must(s.WriteTable(&b))
	golden(t, "spoke.golden", b.String())
}
