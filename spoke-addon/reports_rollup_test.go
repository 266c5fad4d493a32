package spokeaddon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	policyv1 "regent.dev/regent/api/policy/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/reports"
	"regent.dev/regent/reports/rollup"
	spokeaddon "regent.dev/regent/spoke-addon"
)

// TestReportsRollup runs cluster1's addon with its production hub identity, the test playing the
// admission policy controller (it says when a ClusterAdmissionPolicy serves) and the report
// producers (it writes per-resource reports), and checks what reaches the hub: a summary per
// replicated policy in the cluster namespace, bounded, and the policy's compliance.
func TestReportsRollup(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}}})
	hub := newClient(t, f.Hub.Config)
	local := newClient(t, f.Managed[0].Config)
	mgr, err := spokeaddon.New(spokeaddon.Options{Hub: addonHubIdentity(t, f.Hub, "cluster1"), Local: f.Managed[0].Config,
		ClusterName: "cluster1", ExternalConfigPolicy: true, ExternalAdmissionPolicy: true,
		ReportsRollup: rollup.Limits{MaxResults: 3}})
	if err != nil {
		t.Fatal(err)
	}
	fleettest.StartManager(t, mgr)
	ctx := context.Background()

	// The root policy default/no-latest ships a ClusterAdmissionPolicy; the hub replicates it.
	replica := &policyv1.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: "default.no-latest", Namespace: "cluster1", Labels: map[string]string{
			"policy.open-cluster-management.io/root-policy":       "default.no-latest",
			"policy.open-cluster-management.io/cluster-name":      "cluster1",
			"policy.open-cluster-management.io/cluster-namespace": "cluster1",
		}},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Inform, PolicyTemplates: []*policyv1.PolicyTemplate{admissionTemplate("no-latest")}},
	}
	if err := hub.Create(ctx, replica); err != nil {
		t.Fatal(err)
	}
	acknowledge(t, hub, replica)
	// Played admission controller: the policy's newest generation serves.
	eventually(t, wait, func() (bool, string) {
		cap := &kubewardenv1.ClusterAdmissionPolicy{}
		if err := local.Get(ctx, types.NamespacedName{Name: "no-latest"}, cap); err != nil {
			return false, fmt.Sprintf("template ClusterAdmissionPolicy: %v", err)
		}
		cap.Status.Phase, cap.Status.ServingGeneration = "Active", cap.Generation
		err := local.Status().Update(ctx, cap)
		return err == nil, fmt.Sprintf("serve no-latest: %v", err)
	})
	hubCompliance := func(want policyv1.ComplianceState, fragment string) {
		t.Helper()
		eventually(t, wait, func() (bool, string) {
			h := &policyv1.Policy{}
			if err := hub.Get(ctx, client.ObjectKeyFromObject(replica), h); err != nil {
				return false, err.Error()
			}
			msg := ""
			if len(h.Status.Details) == 1 && len(h.Status.Details[0].History) > 0 {
				msg = h.Status.Details[0].History[0].Message
			}
			return h.Status.ComplianceState == want && strings.Contains(msg, fragment),
				fmt.Sprintf("hub replica %s with %q, have %s %q", want, fragment, h.Status.ComplianceState, msg)
		})
	}
	hubCompliance(policyv1.Compliant, "is Active")

	// Played producers: six existing ConfigMaps, five violate no-latest, one passes; a policy
	// created on the cluster itself (no template of a hub policy) has results that stay local.
	if err := local.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}); err != nil {
		t.Fatal(err)
	}
	var subjects []reports.Resource
	for i := range 6 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: fmt.Sprintf("cm-%d", i)}}
		if err := local.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, reports.Resource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: cm.Name, UID: cm.UID})
	}
	record := func(res reports.Resource, policy, result, message string) {
		t.Helper()
		set := []reports.PolicyResults{{Policy: reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeCluster, Name: policy}, Version: "1",
			Results: []openreportsv1alpha1.ReportResult{{Rule: "tag", Result: openreportsv1alpha1.Result(result), Description: message}}}}
		if _, err := reports.Apply(ctx, local, res, reportsv1alpha1.SourceBackground, set, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i, res := range subjects {
		if i == 5 {
			record(res, "no-latest", "pass", "")
			continue
		}
		record(res, "no-latest", "fail", fmt.Sprintf("image of %s uses :latest", res.Name))
		record(res, "local-only", "fail", "not the hub's business")
	}
	// A message longer than a summary keeps is cut.
	record(subjects[4], "no-latest", "fail", strings.Repeat("x", 5000))

	summary := &openreportsv1alpha1.Report{}
	eventually(t, wait, func() (bool, string) {
		err := hub.Get(ctx, types.NamespacedName{Namespace: "cluster1", Name: "default.no-latest"}, summary)
		return err == nil && summary.Summary.Fail == 5 && summary.Summary.Pass == 1,
			fmt.Sprintf("summary cluster1/default.no-latest with 5 fail and 1 pass (%v): %+v", err, summary.Summary)
	})
	if n := len(summary.Results); n != 3 {
		t.Fatalf("summary names %d results, want the 3 worst", n)
	}
	for i, r := range summary.Results {
		want := fmt.Sprintf("cm-%d", i)
		if r.Result != "fail" || len(r.Subjects) != 1 || r.Subjects[0].Name != want || r.Policy != "no-latest" {
			t.Errorf("worst result %d = %s %s on %v, want fail of no-latest on %s", i, r.Result, r.Policy, r.Subjects, want)
		}
	}
	if got := summary.Labels[rollup.LabelRootPolicy]; got != "default.no-latest" {
		t.Errorf("root-policy label %q", got)
	}
	if s := summary.Scope; s == nil || s.Kind != "Policy" || s.Name != "default.no-latest" {
		t.Errorf("scope %+v, want the replicated Policy", s)
	}
	if refs := summary.OwnerReferences; len(refs) != 1 || refs[0].UID != replica.UID {
		t.Errorf("owner references %+v, want the hub replica %s", refs, replica.UID)
	}
	var onHub openreportsv1alpha1.ReportList
	if err := hub.List(ctx, &onHub, client.InNamespace("cluster1")); err != nil {
		t.Fatal(err)
	}
	if len(onHub.Items) != 1 {
		t.Errorf("hub holds %d reports for cluster1, want only no-latest's (local-only has no hub policy)", len(onHub.Items))
	}

	// Serving, but five existing objects violate it: not Compliant.
	hubCompliance(policyv1.NonCompliant, "5 existing objects violate ClusterAdmissionPolicy no-latest")

	// Fixed on the cluster: the summary and the compliance follow.
	for _, res := range subjects[:5] {
		record(res, "no-latest", "pass", "")
	}
	eventually(t, wait, func() (bool, string) {
		err := hub.Get(ctx, types.NamespacedName{Namespace: "cluster1", Name: "default.no-latest"}, summary)
		return err == nil && summary.Summary.Fail == 0 && summary.Summary.Pass == 6 && len(summary.Results) == 0,
			fmt.Sprintf("summary with 6 passes and no worst results (%v): %+v, %d results", err, summary.Summary, len(summary.Results))
	})
	hubCompliance(policyv1.Compliant, "is Active")

	// The policy deleted on the hub: its summary goes.
	if err := hub.Delete(ctx, replica); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, func() (bool, string) {
		err := hub.Get(ctx, types.NamespacedName{Namespace: "cluster1", Name: "default.no-latest"}, &openreportsv1alpha1.Report{})
		return apierrors.IsNotFound(err), fmt.Sprintf("summary of a deleted policy still there (%v)", err)
	})
}

func admissionTemplate(name string) *policyv1.PolicyTemplate {
	raw, _ := json.Marshal(map[string]any{
		"apiVersion": "policies.kubewarden.io/v1",
		"kind":       "ClusterAdmissionPolicy",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{"module": "file:///policies/no-latest.wasm", "mode": "monitor", "rules": []any{map[string]any{
			"operations": []any{"CREATE"}, "apiGroups": []any{""}, "apiVersions": []any{"v1"}, "resources": []any{"configmaps"}}}},
	})
	return &policyv1.PolicyTemplate{ObjectDefinition: runtime.RawExtension{Raw: raw}}
}
