package dryrun_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/spoke-addon/configpolicy/dryrun"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var now = time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC)

func load(t *testing.T, policyFile string, objectFiles ...string) (*policyv1.ConfigurationPolicy, []*unstructured.Unstructured) {
	t.Helper()
	doc, err := os.ReadFile(policyFile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := dryrun.ReadPolicy(doc)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range objectFiles {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		o, err := dryrun.ReadObjects(fh)
		fh.Close()
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o...)
	}
	return p, objs
}

func run(t *testing.T, policyFile string, objectFiles ...string) dryrun.Result {
	t.Helper()
	p, objs := load(t, policyFile, objectFiles...)
	r, err := dryrun.Run(context.Background(), p, objs, now)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n%s", file, got)
	}
}

func TestDryRun_NonCompliant_ReportsOCMsMessagesAndTheChangesEnforceWouldMake(t *testing.T) {
	r := run(t, "testdata/policy.yaml", "testdata/objects.yaml")
	if r.Compliant() {
		t.Fatal("compliant")
	}
	want := "NonCompliant; violation - namespaces [shop] found but not as specified; violation - configmaps [debug] found in namespace shop; violation - configmaps [limits] not found in namespace shop"
	if r.Message != want {
		t.Errorf("message\n got %s\nwant %s", r.Message, want)
	}
	var actions []string
	for _, c := range r.Changes {
		actions = append(actions, string(c.Action)+" "+c.Kind+" "+c.Namespace+"/"+c.Name)
	}
	if got := strings.Join(actions, ", "); got != "update Namespace /shop, delete ConfigMap shop/debug, create ConfigMap shop/limits" {
		t.Errorf("changes %s", got)
	}
	if len(r.Status.RelatedObjects) != 3 || r.Status.CompliancyDetails[0].Conditions[0].Type != "violation" {
		t.Errorf("status %+v", r.Status)
	}
	var out bytes.Buffer
	dryrun.WriteText(&out, r)
	golden(t, "testdata/noncompliant.golden", out.Bytes())
}

func TestDryRun_Compliant_NothingToChange(t *testing.T) {
	r := run(t, "testdata/policy.yaml", "testdata/objects-compliant.yaml")
	if !r.Compliant() || len(r.Changes) != 0 {
		t.Errorf("message %s, changes %+v", r.Message, r.Changes)
	}
	want := "Compliant; notification - namespaces [shop] found as specified; notification - configmaps [debug] missing as expected in namespace shop; notification - configmaps [limits] found as specified in namespace shop"
	if r.Message != want {
		t.Errorf("message\n got %s\nwant %s", r.Message, want)
	}
}

// An enforcing Policy wrapping the ConfigurationPolicy reports as inform (what it finds), and a
// template of a kind the objects and client-go do not know is reported as OCM reports a missing CRD.
func TestDryRun_WrappedEnforcingPolicy_ReportsAsInformAndDiffsTheMustOnlyHaveUpdate(t *testing.T) {
	r := run(t, "testdata/policy-wrapped.yaml", "testdata/pod.yaml")
	for _, want := range []string{
		"NonCompliant; violation - pods [nginx-pod] found but not as specified in namespace default",
		"violation - couldn't find mapping resource with kind Widget (example.com/v1), please check if you have CRD deployed",
	} {
		if !strings.Contains(r.Message, want) {
			t.Errorf("message %s lacks %s", r.Message, want)
		}
	}
	if len(r.Changes) != 1 || r.Changes[0].Action != dryrun.ActionUpdate ||
		!strings.Contains(r.Changes[0].Diff, "-    - containerPort: 80\n+    - containerPort: 8080\n") {
		t.Errorf("changes %+v", r.Changes)
	}
}

func TestDryRun_BadInput_IsAnErrorNotAPanic(t *testing.T) {
	p, objs := load(t, "testdata/policy.yaml", "testdata/objects.yaml", "testdata/objects.yaml")
	if _, err := dryrun.Run(context.Background(), p, objs, now); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("duplicate objects: %v", err)
	}
	for doc, want := range map[string]string{
		"apiVersion: v1\nkind: ConfigMap\n":                                                               `apiVersion "v1", want policy.open-cluster-management.io/v1`,
		"apiVersion: policy.open-cluster-management.io/v1\nkind: PlacementBinding\n":                      "is a PlacementBinding",
		"apiVersion: policy.open-cluster-management.io/v1\nkind: Policy\nspec:\n  policy-templates: []\n": "no ConfigurationPolicy",
		"apiVersion: policy.open-cluster-management.io/v1\nkind: ConfigurationPolicy\nspec: {}\n":         "no object-templates",
	} {
		if _, err := dryrun.ReadPolicy([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", doc, err, want)
		}
	}
	if _, err := dryrun.ReadObjects(strings.NewReader("kind: [unclosed\n")); err == nil {
		t.Error("invalid YAML read")
	}
}
