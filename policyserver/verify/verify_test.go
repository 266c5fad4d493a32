package verify_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"regent.dev/regent/policyserver/internal/guests"
	"regent.dev/regent/policyserver/verify"
	"regent.dev/regent/test/corpora"
)

func run(t *testing.T, paths ...string) verify.Report {
	t.Helper()
	files, err := verify.Discover(paths)
	if err != nil {
		t.Fatal(err)
	}
	r, err := verify.Run(context.Background(), files, verify.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func cases(r verify.Report) map[string]verify.Case {
	out := map[string]verify.Case{}
	for _, s := range r.Suites {
		for _, c := range s.Cases {
			out[filepath.Base(filepath.Dir(s.Path))+"/"+filepath.Base(s.Path)+"#"+c.Name] = c
		}
	}
	return out
}

func TestVerify_Discover_FindsGatorSuitesAndPolicyTestsOnly(t *testing.T) {
	files, err := verify.Discover([]string{"testdata/passing"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"testdata/passing/monitor.test.yaml", "testdata/passing/require-team-label.test.yaml", "testdata/passing/requiredlabels/suite.yaml"}
	if strings.Join(files, " ") != strings.Join(want, " ") {
		t.Errorf("found %v, want %v", files, want)
	}
	if _, err := verify.Discover([]string{"testdata/passing/requiredlabels/template.yaml"}); err == nil {
		t.Error("a template named on its own was taken as a suite")
	}
}

func TestVerify_PassingSuites_PassSkippingMarkedCases(t *testing.T) {
	r := run(t, "testdata/passing")
	if r.Failed() {
		var out bytes.Buffer
		for _, s := range r.Suites {
			verify.WriteSuite(&out, s, true)
		}
		t.Fatalf("failed:\n%s", out.String())
	}
	got := cases(r)
	if len(got) != 8 {
		t.Errorf("ran %d cases, want 8: %v", len(got), got)
	}
	if c := got["requiredlabels/suite.yaml#owner-and-tier/needs-inventory"]; c.Skipped != "" || c.Failure != "" {
		t.Errorf("inventory case did not run and pass: %+v", c)
	}
	if c := got["passing/monitor.test.yaml#a case marked skip does not run"]; c.Skipped == "" {
		t.Errorf("skip case: %+v", c)
	}
	for _, s := range r.Suites {
		if s.Duration <= 0 {
			t.Errorf("%s was not timed", s.Path)
		}
	}
}

func TestVerify_FailingSuites_FailEachWrongExpectationSayingWhat(t *testing.T) {
	r := run(t, "testdata/failing")
	if !r.Failed() {
		t.Fatal("a run with wrong expectations passed")
	}
	got := cases(r)
	for name, want := range map[string]string{
		"requiredlabels/suite.yaml#owner-and-tier/unlabelled-said-to-pass":        "want no violations, got 1",
		"requiredlabels/suite.yaml#owner-and-tier/unlabelled-with-two-violations": "want 2 violations, got 1",
		"failing/wrong-message.test.yaml#expected allowed":                        "want allowed=true, got false",
		"failing/wrong-message.test.yaml#expected another message":                `does not match "has no owner"`,
	} {
		if c := got[name]; !strings.Contains(c.Failure, want) {
			t.Errorf("%s: failure %q, want it to say %q", name, c.Failure, want)
		}
	}
	var out bytes.Buffer
	for _, s := range r.Suites {
		verify.WriteSuite(&out, s, false)
	}
	verify.WriteSummary(&out, r)
	for _, want := range []string{"--- FAIL: owner-and-tier/unlabelled-said-to-pass", "FAIL testdata/failing/requiredlabels/suite.yaml (gator) 0 passed, 2 failed, 0 skipped", "FAIL: 2 suites, 0 cases passed, 4 failed, 0 skipped"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestVerify_PolicyTest_MisspeltExpectationIsAnError(t *testing.T) {
	dir := t.TempDir()
	doc := "apiVersion: regent.dev/v1alpha1\nkind: PolicyTest\npolicy:\n  module: " + abs(t, "../testdata/rego/require-team-label.rego") +
		"\ncases:\n- name: typo\n  request: {apiVersion: v1, kind: Pod, metadata: {name: p}}\n  expect:\n    alowed: false\n"
	write(t, filepath.Join(dir, "typo.test.yaml"), doc)
	r := run(t, dir)
	if len(r.Suites) != 1 || !strings.Contains(r.Suites[0].Error, `unknown field "alowed"`) || !r.Failed() {
		t.Errorf("report %+v", r)
	}
}

func TestVerify_PolicyTest_WaPCMutationPerCaseSettings(t *testing.T) {
	wasm, err := guests.Build("wapc-labels")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "labels.wasm"), wasm, 0o600); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "labels.test.yaml"), `apiVersion: regent.dev/v1alpha1
kind: PolicyTest
policy:
  module: labels.wasm
  mutating: true
  settings: {required: [team]}
cases:
- name: missing label rejected
  request: {apiVersion: v1, kind: Pod, metadata: {name: p}}
  expect: {allowed: false, message: "missing required labels: team", patched: false}
- name: default label added
  request: {apiVersion: v1, kind: Pod, metadata: {name: p}}
  settings: {required: [team], defaults: {team: unowned}}
  expect: {allowed: true, patched: true}
`)
	r := run(t, dir)
	if r.Failed() {
		t.Fatalf("%+v", r)
	}
	if got := cases(r); len(got) != 2 {
		t.Errorf("cases %v", got)
	}
}

// Gator cases with an inventory run with its objects as data.inventory, namespaced and
// cluster-scoped, each case seeing only its own.
func TestVerify_GatorInventoryCases_Run(t *testing.T) {
	r := run(t, "../testdata/gatekeeper/uniqueingresshost", "../testdata/gatekeeper/storageclassexists")
	got := cases(r)
	if len(got) != 8 {
		t.Errorf("ran %d cases, want 8: %v", len(got), got)
	}
	for name, c := range got {
		if c.Failure != "" || c.Skipped != "" {
			t.Errorf("%s: failure %q, skipped %q", name, c.Failure, c.Skipped)
		}
	}
}

// An inventory file that is not a list of objects fails its case, saying so.
func TestVerify_GatorInventory_BadObjectFailsTheCase(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"template.yaml", "constraint.yaml", "shop.yaml"} {
		b, err := os.ReadFile(filepath.Join("../testdata/gatekeeper/uniqueingresshost", f))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, f), string(b))
	}
	write(t, filepath.Join(dir, "nameless.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {namespace: a}\n")
	write(t, filepath.Join(dir, "suite.yaml"), "kind: Suite\napiVersion: test.gatekeeper.sh/v1alpha1\ntests:\n- name: t\n  template: template.yaml\n  constraint: constraint.yaml\n  cases:\n  - name: c\n    object: shop.yaml\n    inventory: [nameless.yaml]\n    assertions: [{violations: no}]\n")
	c := cases(run(t, dir))[filepath.Base(dir)+"/suite.yaml#t/c"]
	if !strings.Contains(c.Failure, "metadata.name") {
		t.Errorf("case: %+v", c)
	}
}

// TestVerify_GatekeeperLibrary runs the gatekeeper-library's suites as `regent verify` would.
func TestVerify_GatekeeperLibrary(t *testing.T) {
	library := corpora.Dir(t, "gatekeeper-library")
	r := run(t, filepath.Join(library, "library"))
	if len(r.Suites) == 0 {
		t.Fatal("no suites found")
	}
	passed, inventoryCases := 0, 0
	for _, s := range r.Suites {
		p, _, _ := s.Counts()
		passed += p
		n, err := verify.InventoryCases(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		inventoryCases += n
		if s.Failed() {
			var out bytes.Buffer
			verify.WriteSuite(&out, s, false)
			t.Errorf("%s", out.String())
		}
	}
	if passed == 0 {
		t.Error("no case passed")
	}
	// Every case passed (or the suite failed above), inventory cases included.
	t.Logf("%d cases passed, %d of them with an inventory", passed, inventoryCases)
}

func abs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func write(t *testing.T, path, doc string) {
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
}
