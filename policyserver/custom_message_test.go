package policyserver

import (
	"testing"
)

// Kubewarden's `message`: a rejection answers with the policy's custom message and keeps the
// policy's own as a cause; an accepted request and a monitor-mode policy are untouched.
func TestServer_CustomMessageReplacesTheRejectionAndKeepsTheCause(t *testing.T) {
	ts := newTestServer(t, testModules(t), `
custom:
  module: wapc-labels.wasm
  settings: {required: [team]}
  message: "ask the platform team"
monitored:
  module: wapc-labels.wasm
  settings: {required: [team]}
  mode: monitor
  message: "ask the platform team"
`)
	_, resp, raw := ts.post(t, "/validate/custom", podRequest(t, "default", map[string]string{"app": "x"}))
	if resp.Allowed || message(resp) != "ask the platform team" {
		t.Fatalf("want a denial with the custom message, got %s", raw)
	}
	if d := resp.Result.Details; d == nil || len(d.Causes) != 1 || d.Causes[0].Message != "missing required labels: team" {
		t.Fatalf("want the policy's own message as the cause, got %s", raw)
	}
	if _, resp, raw := ts.post(t, "/validate/custom", podRequest(t, "default", map[string]string{"team": "a"})); !resp.Allowed || resp.Result != nil {
		t.Fatalf("an accepted request must be left alone, got %s", raw)
	}
	if _, resp, raw := ts.post(t, "/validate/monitored", podRequest(t, "default", nil)); !resp.Allowed || resp.Result != nil {
		t.Fatalf("monitor mode admits without a message, got %s", raw)
	}
}
