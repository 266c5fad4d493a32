package policyserver

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestServer_EveryRuntimeAnswersOverHTTPS(t *testing.T) {
	ts := newTestServer(t, testModules(t), allRuntimes)
	good := podRequest(t, "default", map[string]string{"team": "a", "owner": "me"}, container("c", "nginx:1.27", false))
	cases := []struct {
		policy  string
		request []byte
		allowed bool
		message string
	}{
		{"privileged", podRequest(t, "default", nil, container("root", "nginx:1", true)), false, `privileged container "root" is not allowed`},
		{"privileged", good, true, ""},
		{"labels", podRequest(t, "default", map[string]string{"app": "x"}), false, "missing required labels: team"},
		{"labels", good, true, ""},
		{"latest", podRequest(t, "default", nil, container("web", "nginx:latest", false)), false, "container web uses the :latest tag"},
		{"latest", good, true, ""},
		{"owner", podRequest(t, "default", map[string]string{"team": "a"}), false, `you must provide labels: {"owner"}`},
		{"owner", good, true, ""},
	}
	for _, c := range cases {
		status, resp, raw := ts.post(t, "/validate/"+c.policy, c.request)
		if status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", c.policy, status, raw)
		}
		if resp.Allowed != c.allowed || message(resp) != c.message {
			t.Errorf("%s: want allowed=%v %q, got %s", c.policy, c.allowed, c.message, raw)
		}
		if string(resp.UID) != "705ab4f5-6393-11e8-b7cc-42010a800002" {
			t.Errorf("%s: response uid %q does not echo the request's", c.policy, resp.UID)
		}
	}
}

func TestServer_MutatingPolicyAnswersWithAJSONPatch(t *testing.T) {
	ts := newTestServer(t, testModules(t), allRuntimes)
	_, resp, raw := ts.post(t, "/validate/default-team", podRequest(t, "default", map[string]string{"app": "x"}))
	if !resp.Allowed || resp.PatchType == nil || string(*resp.PatchType) != "JSONPatch" {
		t.Fatalf("want an allowed response with a JSONPatch, got %s", raw)
	}
	if want := `[{"op":"add","path":"/metadata/labels/team","value":"platform"}]`; string(resp.Patch) != want {
		t.Fatalf("patch %s, want %s", resp.Patch, want)
	}
	// The audit endpoint reports the answer without mutating.
	_, resp, raw = ts.post(t, "/audit/default-team", podRequest(t, "default", map[string]string{"app": "x"}))
	if !resp.Allowed || resp.Patch != nil {
		t.Fatalf("audit: want allowed without patch, got %s", raw)
	}
}

func TestServer_PolicyThatMutatesWithoutPermissionIsDenied(t *testing.T) {
	ts := newTestServer(t, testModules(t), `
sneaky:
  module: wapc-labels.wasm
  settings: {required: [team], defaults: {team: platform}}
`)
	_, resp, raw := ts.post(t, "/validate/sneaky", podRequest(t, "default", nil))
	if resp.Allowed || !strings.Contains(message(resp), "not allowed to mutate") {
		t.Fatalf("want a denial for the unexpected mutation, got %s", raw)
	}
}

func TestServer_MonitorModeAdmitsAndAuditReportsTheRealAnswer(t *testing.T) {
	ts := newTestServer(t, testModules(t), `
latest:
  module: disallow-latest.rego
  executionMode: opa
  mode: monitor
`)
	bad := podRequest(t, "default", nil, container("web", "nginx", false))
	if _, resp, raw := ts.post(t, "/validate/latest", bad); !resp.Allowed || resp.Result != nil {
		t.Fatalf("monitor mode must admit, got %s", raw)
	}
	if _, resp, raw := ts.post(t, "/audit/latest", bad); resp.Allowed || message(resp) != "container web has no tag, which means :latest" {
		t.Fatalf("audit must report the denial, got %s", raw)
	}
	metrics := ts.metricsText(t)
	for _, want := range []string{
		`regent_policy_evaluations_total{mode="monitor",outcome="rejected",policy="latest"} 1`,
		`regent_policy_evaluations_total{mode="audit",outcome="rejected",policy="latest"} 1`,
		`regent_policy_evaluation_duration_seconds_count{policy="latest"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestServer_UnknownPolicyOrGenerationIs404(t *testing.T) {
	ts := newTestServer(t, testModules(t), allRuntimes)
	req := podRequest(t, "default", nil)
	for _, path := range []string{"/validate/nope", "/validate/labels/2", "/audit/nope/1"} {
		if status, _, raw := ts.post(t, path, req); status != http.StatusNotFound {
			t.Errorf("%s: want 404, got %d %s", path, status, raw)
		}
	}
	if status, _, _ := ts.post(t, "/validate/labels/1", req); status != http.StatusOK {
		t.Errorf("/validate/labels/1: want 200, got %d", status)
	}
	if status, _, _ := ts.post(t, "/validate/labels/x", req); status != http.StatusBadRequest {
		t.Errorf("bad generation: want 400, got %d", status)
	}
}

func TestServer_NotAnAdmissionReviewIs400(t *testing.T) {
	ts := newTestServer(t, testModules(t), allRuntimes)
	resp, err := ts.client.Post(ts.url+"/validate/labels", "application/json", strings.NewReader(`{"kind":"Pod"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("want 400, got %d", resp.StatusCode)
	}
}

func TestServer_TimeoutDeniesWithAMessageAndTheServerKeepsServing(t *testing.T) {
	ts := newTestServer(t, testModules(t), allRuntimes+`
spin:
  module: wapc-misbehave.wasm
  timeoutSeconds: 1
  settings: {behaviour: loop}
`)
	_, resp, raw := ts.post(t, "/validate/spin", podRequest(t, "default", nil))
	if resp.Allowed || !strings.Contains(message(resp), "policy spin (generation 1) failed, so the request is denied: evaluation timed out") || resp.Result.Code != http.StatusGatewayTimeout {
		t.Fatalf("want a fail-closed timeout denial, got %s", raw)
	}
	if _, resp, raw := ts.post(t, "/validate/labels", podRequest(t, "default", map[string]string{"team": "a"})); !resp.Allowed {
		t.Fatalf("other policies must keep serving, got %s", raw)
	}
}

func TestServer_HealthEndpoints(t *testing.T) {
	ts := newTestServer(t, testModules(t), allRuntimes)
	if body := ts.get(t, "/livez"); body != "ok\n" {
		t.Errorf("/livez: %q", body)
	}
	if body := ts.get(t, "/readyz"); !strings.Contains(body, "labels/1\n") || !strings.Contains(body, "owner/1\n") {
		t.Errorf("/readyz should list the loaded policies: %q", body)
	}
}

func (ts *testServer) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := ts.client.Get(ts.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// metricsText is what the server's metrics listener serves.
func (ts *testServer) metricsText(t *testing.T) string {
	t.Helper()
	w := httptest.NewRecorder()
	ts.MetricsHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", w.Code, w.Body)
	}
	return w.Body.String()
}
