package policyserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/reports"
	"regent.dev/regent/reports/admission"
)

const teamPolicies = `
monitor-team:
  module: require-team-label.rego
  executionMode: opa
  mode: monitor
protect-team:
  module: require-team-label.rego
  executionMode: opa
audit-team:
  module: require-team-label.rego
  executionMode: opa
  reportAdmission: true
`

// reportsServer is a policy server writing admission reports on a fake clock: nothing is
// written until the test steps it.
type reportsServer struct {
	*testServer
	clock *clocktesting.FakeClock
	delay time.Duration
}

func newReportsServer(t *testing.T, c client.Client, capacity int) *reportsServer {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	ts := newTeamServer(t, &admission.Options{Client: c, Clock: clk, Capacity: capacity})
	return &reportsServer{testServer: ts, clock: clk, delay: admission.DefaultDelay}
}

// newTeamServer serves teamPolicies, writing admission reports with reports (nil: none).
func newTeamServer(t testing.TB, reports *admission.Options) *testServer {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "rego", "require-team-label.rego"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "require-team-label.rego"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	return newTestServerWith(t, dir, teamPolicies, Options{AdmissionReports: reports})
}

// metric sums the server's metric name over the series whose labels include want.
func (s *reportsServer) metric(t testing.TB, name string, want ...string) float64 {
	t.Helper()
	families, err := s.metrics.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(want); i += 2 {
				if labelOf(m, want[i]) != want[i+1] {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// settle waits until the queue has read every answer offered to it.
func (s *reportsServer) settle(t *testing.T) {
	t.Helper()
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		offered := s.metric(t, "regent_admission_reports_offered_total")
		read := s.metric(t, "regent_admission_reports_queued_total") + s.metric(t, "regent_admission_reports_skipped_total") +
			s.metric(t, "regent_admission_reports_dropped_total")
		return read == offered, fmt.Sprintf("%v of %v answers read", read, offered)
	})
}

// flush steps the clock until n writes have been done in all (a writer may set its timer just
// after a step, so one step is not always enough).
func (s *reportsServer) flush(t *testing.T, n float64) {
	t.Helper()
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		s.clock.Step(s.delay)
		got := s.metric(t, "regent_admission_reports_writes_total")
		return got >= n, fmt.Sprintf("%v of %v report writes done", got, n)
	})
}

// TestAdmissionReports_ThroughKubeAPIServer runs the policy server behind a real kube-apiserver's
// validating webhooks, one policy per namespace label: a monitor-mode policy, a protect-mode one,
// and a protect-mode one with reportAdmission.
func TestAdmissionReports_ThroughKubeAPIServer(t *testing.T) {
	hub := fleettest.Hub(t)
	c, err := client.New(hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := newReportsServer(t, c, 0)

	const selectorKey = "regent.dev/report-test"
	hook := func(policy string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name:         policy + ".policies.regent.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(s.url + "/validate/" + policy), CABundle: s.caPEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{selectorKey: policy}},
			TimeoutSeconds:          ptr.To[int32](10),
		}
	}
	if err := c.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "regent-report-policies"},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{hook("monitor-team"), hook("protect-team"), hook("audit-team")},
	}); err != nil {
		t.Fatal(err)
	}
	namespace := func(policy string) string {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: policy + "-", Labels: map[string]string{selectorKey: policy}}}
		if policy == "" {
			ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "no-policy-"}}
		}
		if err := c.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		return ns.Name
	}
	monitorNS, protectNS, auditNS, plainNS := namespace("monitor-team"), namespace("protect-team"), namespace("audit-team"), namespace("")
	configMap := func(ns, name string, labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	}

	// kube-apiserver picks webhook configurations up asynchronously; wait until it calls us.
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		err := c.Create(ctx, configMap(protectNS, fmt.Sprintf("probe-%d", time.Now().UnixNano()), nil))
		return err != nil && strings.Contains(err.Error(), "has no team label"), fmt.Sprintf("create in %s: %v", protectNS, err)
	})
	if got := s.metric(t, "regent_admission_reports_offered_total"); got != 0 {
		t.Fatalf("a protect-mode policy without reportAdmission offered %v answers", got)
	}

	writes := 0.0
	t.Run("a monitor-mode denial admits the object and reports a fail named by its UID", func(t *testing.T) {
		cm := configMap(monitorNS, "no-team", nil)
		if err := c.Create(ctx, cm); err != nil {
			t.Fatalf("monitor mode must admit: %v", err)
		}
		s.settle(t)
		writes++
		s.flush(t, writes)
		// Named by the UID the apiserver gave the object: the validating webhook's CREATE carried it.
		if got := s.metric(t, "regent_admission_reports_skipped_total", "reason", "no_uid"); got != 0 {
			t.Errorf("%v CREATE answers came without metadata.uid", got)
		}
		var r reportsv1alpha1.ResourceReport
		if err := c.Get(ctx, client.ObjectKey{Namespace: monitorNS, Name: string(cm.UID)}, &r); err != nil {
			t.Fatalf("report of %s: %v", cm.UID, err)
		}
		if len(r.OwnerReferences) != 1 || r.OwnerReferences[0].UID != cm.UID || r.OwnerReferences[0].Name != "no-team" {
			t.Errorf("owner references %+v", r.OwnerReferences)
		}
		if got := r.Labels["cpol.reports.regent.dev/monitor-team"]; got != "1" {
			t.Errorf("policy label = %q, want generation 1 (labels %v)", got, r.Labels)
		}
		if len(r.Spec.Results) != 1 || r.Spec.Results[0].Result != admission.Fail || r.Spec.Results[0].Policy != "monitor-team" ||
			r.Spec.Results[0].Description != "ConfigMap no-team has no team label" {
			t.Errorf("results %+v", r.Spec.Results)
		}

		// A burst of updates is one write, with the last answer.
		coalesced := s.metric(t, "regent_admission_reports_coalesced_total")
		for i := range 10 {
			fleettest.Edit(t, c, cm, func(cm *corev1.ConfigMap) {
				cm.Data = map[string]string{"n": fmt.Sprint(i)}
				if i == 9 {
					cm.Labels = map[string]string{"team": "a"}
				}
			})
		}
		s.settle(t)
		writes++
		s.flush(t, writes)
		if got := s.metric(t, "regent_admission_reports_writes_total"); got != writes {
			t.Errorf("writes = %v, want %v: ten updates should cost one", got, writes)
		}
		if got := s.metric(t, "regent_admission_reports_coalesced_total") - coalesced; got != 9 {
			t.Errorf("coalesced %v answers, want 9", got)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(&r), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Spec.Results) != 1 || r.Spec.Results[0].Result != admission.Pass {
			t.Errorf("after the team label: results %+v, want one pass", r.Spec.Results)
		}

		// Deleting the object reports nothing: the DELETE is skipped, and the garbage collector
		// deletes the report with its owner.
		if err := c.Delete(ctx, cm); err != nil {
			t.Fatal(err)
		}
		s.settle(t)
		if got := s.metric(t, "regent_admission_reports_skipped_total", "reason", "delete"); got != 1 {
			t.Errorf("DELETE answers skipped = %v, want 1", got)
		}
		fleettest.Eventually(t, 2*time.Minute, func() (bool, string) {
			err := c.Get(ctx, client.ObjectKeyFromObject(&r), &reportsv1alpha1.ResourceReport{})
			return apierrors.IsNotFound(err), fmt.Sprintf("report of the deleted ConfigMap: %v", err)
		})
	})

	t.Run("a request sent twice is one result and one write", func(t *testing.T) {
		cm := configMap(plainNS, "twice", nil)
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		req := admissionRequestFor(t, "f00dfeed-0000-4000-8000-000000000001", "UPDATE", cm)
		for range 2 {
			if code, resp, body := s.post(t, "/validate/monitor-team", req); code != 200 || !resp.Allowed {
				t.Fatalf("status %d: %s", code, body)
			}
		}
		s.settle(t)
		writes++
		s.flush(t, writes)
		if got := s.metric(t, "regent_admission_reports_skipped_total", "reason", "duplicate"); got != 1 {
			t.Errorf("duplicates = %v, want 1", got)
		}
		if got := s.metric(t, "regent_admission_reports_writes_total"); got != writes {
			t.Errorf("writes = %v, want %v", got, writes)
		}
		var r reportsv1alpha1.ResourceReport
		if err := c.Get(ctx, client.ObjectKey{Namespace: plainNS, Name: string(cm.UID)}, &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Spec.Results) != 1 {
			t.Errorf("results %+v, want one", r.Spec.Results)
		}
	})

	t.Run("protect mode reports only when the policy asks", func(t *testing.T) {
		offered := s.metric(t, "regent_admission_reports_offered_total")
		if err := c.Create(ctx, configMap(protectNS, "labelled", map[string]string{"team": "a"})); err != nil {
			t.Fatal(err)
		}
		if got := s.metric(t, "regent_admission_reports_offered_total"); got != offered {
			t.Errorf("protect-mode policy without reportAdmission offered %v answers", got-offered)
		}

		// With reportAdmission: a denied CREATE is reported under a UID that is never stored,
		// and the garbage collector removes that report; an admitted one keeps its pass.
		denied := configMap(auditNS, "denied", nil)
		if err := c.Create(ctx, denied); err == nil || !strings.Contains(err.Error(), "has no team label") {
			t.Fatalf("protect mode must deny: %v", err)
		}
		admitted := configMap(auditNS, "admitted", map[string]string{"team": "a"})
		if err := c.Create(ctx, admitted); err != nil {
			t.Fatal(err)
		}
		s.settle(t)
		writes += 2
		s.flush(t, writes)
		var list reportsv1alpha1.ResourceReportList
		if err := c.List(ctx, &list, client.InNamespace(auditNS)); err != nil {
			t.Fatal(err)
		}
		for _, r := range list.Items {
			if r.Name != string(admitted.UID) && (len(r.Spec.Results) != 1 || r.Spec.Results[0].Result != admission.Fail) {
				t.Errorf("report %s of the denied object: %+v", r.Name, r.Spec.Results)
			}
		}
		var r reportsv1alpha1.ResourceReport
		if err := c.Get(ctx, client.ObjectKey{Namespace: auditNS, Name: string(admitted.UID)}, &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Spec.Results) != 1 || r.Spec.Results[0].Result != admission.Pass || r.Labels["cpol.reports.regent.dev/audit-team"] != "1" {
			t.Errorf("report of the admitted object: labels %v results %+v", r.Labels, r.Spec.Results)
		}
		// Both were real writes: the denied object's report existed until the collector came.
		if got := s.metric(t, "regent_admission_reports_writes_total", "outcome", "written"); got != writes {
			t.Errorf("reports written = %v, want %v", got, writes)
		}
		fleettest.Eventually(t, 2*time.Minute, func() (bool, string) {
			if err := c.List(ctx, &list, client.InNamespace(auditNS)); err != nil {
				return false, err.Error()
			}
			return len(list.Items) == 1, fmt.Sprintf("%d reports in %s, want the admitted object's alone", len(list.Items), auditNS)
		})
	})

	t.Run("a full queue drops and counts, and admission still answers", func(t *testing.T) {
		full := newReportsServer(t, c, 1)
		for i := range 3 {
			cm := configMap(plainNS, fmt.Sprintf("full-%d", i), nil)
			cm.UID = types.UID(fmt.Sprintf("f011f011-0000-4000-8000-00000000000%d", i))
			code, resp, body := full.post(t, "/validate/monitor-team", admissionRequestFor(t, types.UID(fmt.Sprintf("req-%d", i)), "CREATE", cm))
			if code != 200 || !resp.Allowed {
				t.Fatalf("status %d: %s", code, body)
			}
		}
		full.settle(t)
		if got := full.metric(t, "regent_admission_reports_dropped_total"); got != 2 {
			t.Errorf("dropped = %v, want 2 (one resource fits the queue)", got)
		}
	})
}

// admissionRequestFor is the AdmissionRequest a validating webhook gets for op on cm.
func admissionRequestFor(t testing.TB, uid types.UID, op string, cm *corev1.ConfigMap) []byte {
	t.Helper()
	obj := cm.DeepCopy()
	obj.APIVersion, obj.Kind = "v1", "ConfigMap"
	b, err := json.Marshal(map[string]any{
		"uid":       uid,
		"kind":      map[string]string{"group": "", "version": "v1", "kind": "ConfigMap"},
		"resource":  map[string]string{"group": "", "version": "v1", "resource": "configmaps"},
		"operation": op, "namespace": cm.Namespace, "name": cm.Name,
		"userInfo": map[string]any{"username": "alice"},
		"object":   obj,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReportRef_MonitorAlwaysProtectWhenAskedMutatingNever(t *testing.T) {
	own := &reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeNamespaced, Name: "p"}
	for _, tc := range []struct {
		name string
		pc   PolicyConfig
		mode PolicyMode
		want *reports.PolicyRef
	}{
		{"monitor, from a file", PolicyConfig{}, ModeMonitor, &reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeCluster, Name: "f"}},
		{"monitor, from a revision", PolicyConfig{ReportAs: own}, ModeMonitor, own},
		{"protect", PolicyConfig{ReportAs: own}, ModeProtect, nil},
		{"protect with reportAdmission", PolicyConfig{ReportAs: own, ReportAdmission: true}, ModeProtect, own},
		{"mutating monitor", PolicyConfig{Mutating: true}, ModeMonitor, nil},
		{"mutating (Kubewarden spelling) with reportAdmission", PolicyConfig{AllowedToMutate: true, ReportAdmission: true}, ModeProtect, nil},
	} {
		got := reportRef("f", tc.pc, tc.mode)
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
