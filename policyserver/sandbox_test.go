package policyserver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"regent.dev/regent/policyserver/internal/guests"
)

// sandboxModules is a directory with the policies that test the sandbox: a guest that floods
// its logs and a Rego policy that calls http.send.
func sandboxModules(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	b, err := guests.Build("wapc-flood")
	if err != nil {
		t.Fatal(err)
	}
	root, err := guests.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "policyserver", "testdata", "rego", "exfiltrate.rego"))
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"wapc-flood.wasm": b, "exfiltrate.rego": src} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestServer_GuestLogFloodIsDroppedAndCounted(t *testing.T) {
	ts := newTestServer(t, sandboxModules(t), `
flood:
  module: wapc-flood.wasm
`)
	req := podRequest(t, "default", map[string]string{"flood": "5000"}, container("c", "nginx:1", false))
	if _, resp, raw := ts.post(t, "/validate/flood", req); !resp.Allowed {
		t.Fatalf("dropped log lines must not change the answer, got %s", raw)
	}
	metrics := ts.metricsText(t)
	if !strings.Contains(metrics, `regent_policy_guest_log_lines_dropped_total{policy="flood"}`) {
		t.Fatalf("the metrics listener does not count the dropped lines:\n%s", metrics)
	}
}

func TestServer_HTTPSendIsServedOnlyToAPolicyThatAllowsNetworkBuiltins(t *testing.T) {
	secret := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "instance-role-credentials")
	}))
	t.Cleanup(secret.Close)
	dir := sandboxModules(t)
	policy := func(allow bool) string {
		return fmt.Sprintf("exfil:\n  module: exfiltrate.rego\n  executionMode: opa\n  settings: {url: %q}\n  allowNetworkBuiltins: %v\n", secret.URL, allow)
	}

	ts := newTestServer(t, dir, "")
	cfg, err := ReadConfig(writeConfig(t, dir, policy(false)))
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Apply(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `"http.send"`) {
		t.Fatalf("want a load error naming http.send, got %v", err)
	}

	ts = newTestServer(t, dir, policy(true))
	if _, resp, raw := ts.post(t, "/validate/exfil", podRequest(t, "default", nil)); resp.Allowed || message(resp) != "instance-role-credentials" {
		t.Fatalf("a policy that allows network built-ins must reach the server, got %s", raw)
	}
}
