package policyserver

import (
	"context"
	"strings"
	"testing"
)

const groupPolicies = `
either:
  expression: "team() || owner()"
  message: "a pod needs a team or an owner"
  policies:
    team: {module: wapc-labels.wasm, settings: {required: [team]}}
    owner: {module: wapc-labels.wasm, settings: {required: [owner]}}
teamNotOwner:
  expression: "team() && !owner()"
  message: "team pods must not name an owner"
  policies:
    team: {module: wapc-labels.wasm, settings: {required: [team]}}
    owner: {module: wapc-labels.wasm, settings: {required: [owner]}}
watched:
  mode: monitor
  expression: "team()"
  message: "a pod needs a team"
  policies:
    team: {module: wapc-labels.wasm, settings: {required: [team]}}
`

// Kubewarden's policy groups: the members' verdicts combine through the expression; a rejection
// answers with the group's message and each rejecting member's message as a cause under
// spec.policies.<member>.
func TestServer_PolicyGroup_ExpressionCombinesMemberVerdicts(t *testing.T) {
	ts := newTestServer(t, testModules(t), groupPolicies)

	if _, resp, raw := ts.post(t, "/validate/either", podRequest(t, "default", map[string]string{"owner": "x"})); !resp.Allowed {
		t.Fatalf("owner() holds, so team() || owner() must admit; got %s", raw)
	}
	_, resp, raw := ts.post(t, "/validate/either", podRequest(t, "default", map[string]string{"app": "x"}))
	if resp.Allowed || message(resp) != "a pod needs a team or an owner" {
		t.Fatalf("want the group's message, got %s", raw)
	}
	d := resp.Result.Details
	if d == nil || len(d.Causes) != 2 ||
		d.Causes[0].Field != "spec.policies.owner" || d.Causes[0].Message != "missing required labels: owner" ||
		d.Causes[1].Field != "spec.policies.team" || d.Causes[1].Message != "missing required labels: team" {
		t.Fatalf("want both members' messages as causes, got %s", raw)
	}

	if _, resp, raw := ts.post(t, "/validate/teamNotOwner", podRequest(t, "default", map[string]string{"team": "a"})); !resp.Allowed {
		t.Fatalf("team() && !owner() must admit a pod with a team and no owner; got %s", raw)
	}
	_, resp, raw = ts.post(t, "/validate/teamNotOwner", podRequest(t, "default", map[string]string{"team": "a", "owner": "b"}))
	if resp.Allowed || message(resp) != "team pods must not name an owner" {
		t.Fatalf("an accepting member negated must deny; got %s", raw)
	}
	if d := resp.Result.Details; d != nil && len(d.Causes) != 0 {
		t.Fatalf("no member rejected, so no cause; got %s", raw)
	}

	if _, resp, raw := ts.post(t, "/validate/watched", podRequest(t, "default", nil)); !resp.Allowed {
		t.Fatalf("a monitor-mode group admits; got %s", raw)
	}
}

// A group whose expression does not compile, is not a bool, or calls no member is not loaded,
// with the reason, as Kubewarden refuses it.
func TestServer_PolicyGroup_BadExpressionIsNotLoaded(t *testing.T) {
	for expr, want := range map[string]string{
		"123":              "must evaluate to bool",
		"team() && nope()": "compilation failed",
		"team() &&":        "compilation failed",
	} {
		t.Run(expr, func(t *testing.T) {
			dir := testModules(t)
			ts := newTestServer(t, dir, "")
			cfg, err := ReadConfig(writeConfig(t, dir, `
bad:
  expression: "`+expr+`"
  message: "m"
  policies:
    team: {module: wapc-labels.wasm, settings: {required: [team]}}
`))
			if err != nil {
				t.Fatal(err)
			}
			err = ts.Server.Apply(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("want an error saying %q, got %v", want, err)
			}
		})
	}
}
