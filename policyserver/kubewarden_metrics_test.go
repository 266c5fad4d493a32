package policyserver

import (
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kubewarden's Grafana dashboard reads kubewarden_policy_evaluations_total and the latency
// histogram by these labels; each evaluation must land on exactly the series Kubewarden's own
// server would have counted it in.
func TestServer_KubewardenMetricsCarryKubewardensLabels(t *testing.T) {
	ts := newTestServer(t, testModules(t), `
latest:
  module: disallow-latest.rego
  executionMode: opa
  mode: monitor
default-team:
  module: wapc-labels.wasm
  allowedToMutate: true
  settings: {required: [team], defaults: {team: platform}}
`)
	bad := podRequest(t, "team-a", nil, container("web", "nginx", false))
	ts.post(t, "/validate/latest", bad)
	ts.post(t, "/audit/latest", bad)
	ts.post(t, "/validate/default-team", podRequest(t, "team-b", map[string]string{"app": "x"}))

	metrics := ts.metricsText(t)
	for _, want := range []string{
		// Monitor mode admits, but "accepted" is the policy's own answer, as in Kubewarden.
		`kubewarden_policy_evaluations_total{accepted="false",error_code="403",mutated="false",policy_mode="monitor",policy_name="latest",request_origin="validate",resource_kind="Pod",resource_namespace="team-a",resource_request_operation="CREATE"} 1`,
		`kubewarden_policy_evaluations_total{accepted="false",error_code="403",mutated="false",policy_mode="monitor",policy_name="latest",request_origin="audit",resource_kind="Pod",resource_namespace="team-a",resource_request_operation="CREATE"} 1`,
		`kubewarden_policy_evaluations_total{accepted="true",error_code="",mutated="true",policy_mode="protect",policy_name="default-team",request_origin="validate",resource_kind="Pod",resource_namespace="team-b",resource_request_operation="CREATE"} 1`,
		`kubewarden_policy_evaluation_latency_milliseconds_count{accepted="true",error_code="",mutated="true",policy_mode="protect",policy_name="default-team",request_origin="validate",resource_kind="Pod",resource_namespace="team-b",resource_request_operation="CREATE"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks\n  %s\nkubewarden lines:\n%s", want, grepLines(metrics, "kubewarden_policy_evaluations_total"))
		}
	}
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestRequestLabels_ApiserverOrderOtherOrdersAndClusterScope(t *testing.T) {
	// kube-apiserver's order: requestKind before namespace and operation, objects last.
	apiserver, err := json.Marshal(admissionv1.AdmissionRequest{
		UID:         "u",
		Kind:        metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		RequestKind: &metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Namespace:   "ns", Operation: admissionv1.Update,
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, request         string
		kind, namespace, oper string
	}{
		{"apiserver order, requestKind wins", string(apiserver), "Deployment", "ns", "UPDATE"},
		{"objects first, no requestKind", `{"object":{"kind":"X","metadata":{"namespace":"no"}},"operation":"CREATE","kind":{"kind":"Namespace"}}`, "Namespace", "", "CREATE"},
		{"cluster-scoped delete", `{"uid":"u","kind":{"kind":"ClusterRole"},"operation":"DELETE","oldObject":{}}`, "ClusterRole", "", "DELETE"},
		{"not an object", `[1]`, "", "", ""},
		{"truncated", `{"kind":{"kind":"Pod"},"namespace":"a","object":{`, "Pod", "a", ""},
	}
	for _, c := range cases {
		kind, ns, op := requestLabels([]byte(c.request))
		if kind != c.kind || ns != c.namespace || op != c.oper {
			t.Errorf("%s: got (%q, %q, %q), want (%q, %q, %q)", c.name, kind, ns, op, c.kind, c.namespace, c.oper)
		}
	}
}
