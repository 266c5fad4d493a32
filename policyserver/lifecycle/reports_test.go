package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/internal/guests"
	"regent.dev/regent/reports"
	"regent.dev/regent/reports/admission"
)

// The server serves "namespaced-shop-p", but reports name the AdmissionPolicy "p" of its
// namespace, as the aggregator's pol-<name> Reports and the background scan do.
func TestRevision_AnswersAreReportedUnderThePolicysOwnNameAndScope(t *testing.T) {
	data, _ := json.Marshal(kubewardenv1.PolicySpec{Module: "x.rego", ReportAdmission: true})
	for kind, want := range map[string]reports.PolicyRef{
		kubewardenv1.KindClusterAdmissionPolicy: {Scope: reportsv1alpha1.PolicyScopeCluster, Name: "p"},
		kubewardenv1.KindAdmissionPolicy:        {Scope: reportsv1alpha1.PolicyScopeNamespaced, Name: "p"},
		// Groups as the background scan reports them: never the name of a same-named policy.
		kubewardenv1.KindClusterAdmissionPolicyGroup: {Scope: reportsv1alpha1.PolicyScopeCluster, Name: "group/p"},
		kubewardenv1.KindAdmissionPolicyGroup:        {Scope: reportsv1alpha1.PolicyScopeNamespaced, Name: "group/p"},
	} {
		rev, err := decodeRevision(&kubewardenv1.PolicyRevision{Spec: kubewardenv1.PolicyRevisionSpec{
			ObjectReference: kubewardenv1.PolicyReference{Kind: kind, Name: "p", Namespace: "shop"}, PolicyGeneration: 4,
			Data: runtime.RawExtension{Raw: data}}})
		if err != nil {
			t.Fatal(err)
		}
		pc := rev.policyConfig("x.wasm", "", "")
		if pc.ReportAs == nil || *pc.ReportAs != want {
			t.Errorf("%s (served as %s): reported as %+v, want %+v", kind, rev.key.Name, pc.ReportAs, want)
		}
		if !pc.ReportAdmission {
			t.Errorf("%s: reportAdmission did not reach the server", kind)
		}
	}
}

// TestReplica_MonitorModeAnswerOfAnAdmissionPolicyIsReportedUnderItsOwnName: a replica serving
// a monitor-mode AdmissionPolicy's revision writes the report of the object it was asked about,
// labelled pol.reports.regent.dev/<policy> = the generation it serves and the classification the
// policy's annotations give (read by the replica's informers: its category, and severity info
// for monitor mode, whatever the severity annotation says, as Kubewarden's audit scanner does).
func TestReplica_MonitorModeAnswerOfAnAdmissionPolicyIsReportedUnderItsOwnName(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const ps, policy, ns = "reporting", "teamcheck", "shop"
	if err := e.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	shared := e.policyServer(t, ps)
	r := e.startReplica(t, Options{PolicyServer: ps, SharedCache: shared, Version: "v1",
		Server: policyserver.Options{AdmissionReports: &admission.Options{}}})

	root, err := guests.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "policyserver", "testdata", "rego", "require-team-label.rego"))
	if err != nil {
		t.Fatal(err)
	}
	spec := regoSpec(writeFile(t, "require-team-label.rego", src))
	spec.Mode, spec.PolicyServer = kubewardenv1.ModeMonitor, ps
	data, _ := json.Marshal(spec)
	ref := kubewardenv1.PolicyReference{APIVersion: "policies.kubewarden.io/v1", Kind: kubewardenv1.KindAdmissionPolicy, Namespace: ns, Name: policy}
	pol := &kubewardenv1.AdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: policy, Annotations: map[string]string{
		kubewardenv1.AnnotationSeverity: "high", kubewardenv1.AnnotationCategory: "Team rules"}}, Spec: spec}
	pol.Spec.Rules = []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}
	if err := e.client.Create(ctx, pol); err != nil {
		t.Fatal(err)
	}
	rev := &kubewardenv1.PolicyRevision{
		ObjectMeta: metav1.ObjectMeta{Name: ref.RevisionName(3), Namespace: testNamespace, Labels: map[string]string{kubewardenv1.PolicyServerLabel: ps}},
		Spec:       kubewardenv1.PolicyRevisionSpec{ObjectReference: ref, PolicyGeneration: 3, Enabled: true, Data: runtime.RawExtension{Raw: data}},
	}
	if err := e.client.Create(ctx, rev); err != nil {
		t.Fatal(err)
	}
	e.waitRevision(t, rev.Name, "Ready on replica 0", readyOn(0, ""))

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-team"}}
	if err := e.client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	obj, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": cm.Name, "namespace": ns, "uid": cm.UID}})
	body, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{"uid": "0b5e0000-0000-4000-8000-000000000001", "operation": "UPDATE",
			"kind":      map[string]any{"group": "", "version": "v1", "kind": "ConfigMap"},
			"resource":  map[string]any{"group": "", "version": "v1", "resource": "configmaps"},
			"namespace": ns, "name": cm.Name, "userInfo": map[string]any{"username": "alice"},
			"object": json.RawMessage(obj), "oldObject": json.RawMessage(obj)}})
	resp, err := r.client.Post(r.url+"/validate/"+ref.ServerPolicyName()+"/3", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}

	var report reportsv1alpha1.ResourceReport
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		err := e.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: string(cm.UID)}, &report)
		return err == nil, fmt.Sprintf("report of %s: %v", cm.UID, err)
	})
	class := reports.Classification{Severity: "info", Category: "Team rules"}
	if got, want := report.Labels["pol.reports.regent.dev/"+policy], reports.Version("3", pol.Annotations); got != want {
		t.Errorf("policy label = %q, want %q: the served generation 3 and the classification (labels %v)", got, want, report.Labels)
	}
	if len(report.Spec.Results) != 1 || report.Spec.Results[0].Policy != policy || report.Spec.Results[0].Result != admission.Fail ||
		report.Spec.Results[0].Properties[reportsv1alpha1.PolicyScopeProperty] != "namespaced" ||
		report.Spec.Results[0].Severity != class.Severity || report.Spec.Results[0].Category != class.Category {
		t.Errorf("results %+v", report.Spec.Results)
	}
}
