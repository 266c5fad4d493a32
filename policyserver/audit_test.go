package policyserver

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

// Audit is POST /audit/<policy>/<generation> without the HTTP hop: the same answer for the same
// request, a mutation never applied, and an unloaded generation an error instead of a 404.
func TestAudit_AnswersAsTheAuditEndpoint(t *testing.T) {
	dir := testModules(t)
	ts := newTestServer(t, dir, `
latest:
  module: disallow-latest.rego
  executionMode: opa
  mode: monitor
default-team:
  module: wapc-labels.wasm
  mutating: true
  settings: {required: [team], defaults: {team: platform}}
`)
	for _, tc := range []struct {
		policy, outcome string
		request         []byte
	}{
		{"latest", "rejected", podRequest(t, "default", nil, container("c", "nginx:latest", false))},
		{"latest", "accepted", podRequest(t, "default", nil, container("c", "nginx:1.27", false))},
		{"default-team", "accepted", podRequest(t, "default", nil, container("c", "nginx:1.27", false))},
	} {
		code, overHTTP, raw := ts.post(t, "/audit/"+tc.policy+"/1", tc.request)
		if code != 200 {
			t.Fatalf("%s: %d %s", tc.policy, code, raw)
		}
		inProcess, outcome, err := ts.Audit(context.Background(), tc.policy, 1, tc.request)
		if err != nil {
			t.Fatalf("%s: %v", tc.policy, err)
		}
		if !reflect.DeepEqual(inProcess, overHTTP) || outcome != tc.outcome {
			t.Errorf("%s: in process %+v (%s), over HTTP %+v, want the same answer, outcome %s", tc.policy, inProcess, outcome, overHTTP, tc.outcome)
		}
		if inProcess.Patch != nil {
			t.Errorf("%s: an audit applied a mutation", tc.policy)
		}
	}
	if _, _, err := ts.Audit(context.Background(), "latest", 2, podRequest(t, "default", nil)); !errors.Is(err, ErrNotLoaded) {
		t.Errorf("unloaded generation: %v, want ErrNotLoaded", err)
	}
}
