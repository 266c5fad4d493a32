package localrun_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"

	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/internal/guests"
	"regent.dev/regent/policyserver/lifecycle/pull"
	"regent.dev/regent/policyserver/localrun"
)

const (
	regoPolicy     = "../testdata/rego/require-team-label.rego"
	templatePolicy = "../testdata/gatekeeper/requiredlabels/template.yaml"
	constraint     = "../testdata/gatekeeper/requiredlabels/constraint.yaml"
)

func run(t *testing.T, opts localrun.Options, requestFile string) localrun.Result {
	t.Helper()
	ctx := context.Background()
	r, err := localrun.Load(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	doc, err := os.ReadFile(requestFile)
	if err != nil {
		t.Fatal(err)
	}
	review, err := localrun.ReviewOf(doc)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Review(ctx, review)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRun_Rego_RejectsUnlabelledPodWithThePolicysMessage(t *testing.T) {
	res := run(t, localrun.Options{Policy: policyserver.PolicyConfig{Module: regoPolicy}}, "testdata/pod-unlabelled.yaml")
	if res.Response.Allowed {
		t.Fatalf("allowed: %s", res.Review)
	}
	if res.Response.Result == nil || res.Response.Result.Message != "Pod web has no team label" || res.Response.Result.Code != 403 {
		t.Errorf("result %+v", res.Response.Result)
	}
	var review struct{ APIVersion, Kind string }
	if err := json.Unmarshal(res.Review, &review); err != nil || review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
		t.Errorf("review %s (%v)", res.Review, err)
	}
}

func TestRun_Rego_AllowsLabelledPodAndAnswersWithTheRequestsUID(t *testing.T) {
	res := run(t, localrun.Options{Policy: policyserver.PolicyConfig{Module: regoPolicy}}, "testdata/pod-team-review.json")
	if !res.Response.Allowed || res.Response.UID != "0b4c1c64-5d0c-4bd5-8d4c-1f0e9f6d3a21" {
		t.Errorf("response %s", res.Review)
	}
}

func TestRun_MonitorMode_AdmitsWhatProtectWouldReject(t *testing.T) {
	res := run(t, localrun.Options{Policy: policyserver.PolicyConfig{Module: regoPolicy, Mode: policyserver.ModeMonitor}}, "testdata/pod-unlabelled.yaml")
	if !res.Response.Allowed {
		t.Errorf("monitor mode rejected: %s", res.Review)
	}
}

func TestRun_CustomMessage_ReplacesThePolicysAndKeepsItAsCause(t *testing.T) {
	res := run(t, localrun.Options{Policy: policyserver.PolicyConfig{Module: regoPolicy, Message: "ask the platform team"}}, "testdata/pod-unlabelled.yaml")
	if res.Response.Allowed || res.Response.Result.Message != "ask the platform team" ||
		res.Response.Result.Details == nil || res.Response.Result.Details.Causes[0].Message != "Pod web has no team label" {
		t.Errorf("response %s", res.Review)
	}
}

func TestRun_GatekeeperTemplate_TakesTheConstraintAsSettings(t *testing.T) {
	doc, err := os.ReadFile(constraint)
	if err != nil {
		t.Fatal(err)
	}
	settings, err := localrun.Settings(doc)
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, localrun.Options{Policy: policyserver.PolicyConfig{Module: templatePolicy, Settings: settings}}, "../testdata/gatekeeper/requiredlabels/unlabelled.yaml")
	if res.Response.Allowed || !strings.Contains(res.Response.Result.Message, `you must provide labels: {"owner", "tier"}`) {
		t.Errorf("response %s", res.Review)
	}
	res = run(t, localrun.Options{Policy: policyserver.PolicyConfig{Module: templatePolicy, Settings: settings}}, "../testdata/gatekeeper/requiredlabels/labelled.yaml")
	if !res.Response.Allowed {
		t.Errorf("labelled object rejected: %s", res.Review)
	}
}

func TestRun_BadSettings_FailToLoadSayingWhy(t *testing.T) {
	_, err := localrun.Load(context.Background(), localrun.Options{Policy: policyserver.PolicyConfig{Module: labelsGuest(t), Settings: json.RawMessage(`{"required": "team"}`)}})
	if err == nil || !strings.Contains(err.Error(), "settings rejected by the policy: settings must be {required: [string]") {
		t.Fatalf("err %v", err)
	}
}

func labelsGuest(t *testing.T) string {
	t.Helper()
	wasm, err := guests.Build("wapc-labels")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "labels.wasm")
	if err := os.WriteFile(path, wasm, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRun_WaPCMutation_IsAJSONPatchOnlyWhenThePolicyMayMutate(t *testing.T) {
	module := labelsGuest(t)
	settings := json.RawMessage(`{"required": ["team"], "defaults": {"team": "unowned"}}`)
	res := run(t, localrun.Options{Policy: policyserver.PolicyConfig{Module: module, Settings: settings, Mutating: true}}, "testdata/pod-unlabelled.yaml")
	if !res.Response.Allowed || res.Response.PatchType == nil || !strings.Contains(string(res.Response.Patch), `"unowned"`) {
		t.Errorf("mutating: %s", res.Review)
	}
	res = run(t, localrun.Options{Policy: policyserver.PolicyConfig{Module: module, Settings: settings}}, "testdata/pod-unlabelled.yaml")
	if res.Response.Allowed || !strings.Contains(res.Response.Result.Message, "not allowed to mutate") {
		t.Errorf("not mutating: %s", res.Review)
	}
}

func TestRun_RegistryModule_IsPulledAsAPolicyRevisionWouldBe(t *testing.T) {
	module := labelsGuest(t)
	wasm, err := os.ReadFile(module)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/policies/labels:v1"
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: static.NewLayer(wasm, pull.WasmLayerMediaType)})
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	res := run(t, localrun.Options{Policy: policyserver.PolicyConfig{Module: "registry://" + ref, Settings: json.RawMessage(`{"required": ["team"]}`)}}, "testdata/pod-unlabelled.yaml")
	if res.Response.Allowed || res.Response.Result.Message != "missing required labels: team" {
		t.Errorf("response %s", res.Review)
	}
}

func TestRequest_ReadsAReviewItsRequestOrAnObject(t *testing.T) {
	for _, doc := range []string{
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"DELETE","kind":{"group":"","version":"v1","kind":"Pod"}}}`,
		`{"uid":"u","operation":"DELETE","kind":{"group":"","version":"v1","kind":"Pod"}}`,
	} {
		req, err := localrun.Request([]byte(doc))
		if err != nil || !strings.Contains(string(req), `"operation":"DELETE"`) {
			t.Errorf("%s: %s %v", doc, req, err)
		}
	}
	req, err := localrun.Request([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  namespace: shop\nspec:\n  replicas: 12345678901\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"operation":"CREATE"`, `"group":"apps"`, `"namespace":"shop"`, `"replicas":12345678901`} {
		if !strings.Contains(string(req), want) {
			t.Errorf("request %s lacks %s", req, want)
		}
	}
	if _, err := localrun.Request([]byte("just: words\n")); err == nil {
		t.Error("a document that is no request was taken")
	}
}
