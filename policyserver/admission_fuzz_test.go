package policyserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"regent.dev/regent/policyserver/internal/guests"
)

// fuzzPolicies are the policies FuzzAdmissionReview posts to: an OPA policy, a mutating waPC
// policy, the same in monitor mode, and through the audit path.
const fuzzPolicies = `
latest:
  module: disallow-latest.rego
  executionMode: opa
default-team:
  module: wapc-labels.wasm
  mutating: true
  settings: {required: [team, owner], defaults: {team: platform}}
monitor-team:
  module: wapc-labels.wasm
  mode: monitor
  settings: {required: [team]}
`

var fuzzPaths = []string{"/validate/latest", "/validate/default-team", "/audit/default-team", "/validate/monitor-team", "/validate/absent"}

var (
	admissionOnce       sync.Once
	fuzzAdmissionServer *Server
)

// fuzzServer loads fuzzPolicies once per process: building and compiling them costs seconds (on
// a cold build cache, more than the 10 s a fuzz worker may spend on one input before it counts as
// hung, so FuzzAdmissionReview loads them before fuzzing starts), an evaluation microseconds.
func fuzzServer(t testing.TB) *Server {
	admissionOnce.Do(func() {
		dir := t.TempDir() // read only while the policies load
		b, err := guests.Build("wapc-labels")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "wapc-labels.wasm"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		src, err := os.ReadFile(filepath.Join("testdata", "rego", "disallow-latest.rego"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "disallow-latest.rego"), src, 0o644); err != nil {
			t.Fatal(err)
		}
		cacheDir, err := guests.CacheDir("wazero")
		if err != nil {
			t.Fatal(err)
		}
		// The server outlives the test that happened to build it: every input shares it.
		s, err := NewServer(context.Background(), Options{CacheDir: cacheDir})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := ReadConfig(writeConfig(t, dir, fuzzPolicies))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Apply(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		fuzzAdmissionServer = s
	})
	if fuzzAdmissionServer == nil {
		t.Fatal("the fuzz server failed to start in an earlier input")
	}
	return fuzzAdmissionServer
}

// FuzzAdmissionReview posts arbitrary bodies to the admission handler with loaded policies and
// checks what kube-apiserver relies on:
//   - a path naming no loaded policy gets 404, whatever the body (it is not read);
//   - a body that is not an admission.k8s.io/v1 or v1beta1 AdmissionReview with a request
//     object (whose uid, if any, is a string) gets 400, never a 5xx or a panic;
//   - any other body gets 200 and a well-formed AdmissionReview in the request's apiVersion
//     whose response carries the request's uid; a denial has a failure status with a code;
//     monitor mode always admits; a patch is a JSONPatch only a mutating policy returns, only
//     on validate, and applied to the request's object it yields a valid object;
//   - the same body answers the same bytes again (pooled instances keep no state between
//     requests).
func FuzzAdmissionReview(f *testing.F) {
	review := func(apiVersion, request string) []byte {
		return []byte(`{"apiVersion":"` + apiVersion + `","kind":"AdmissionReview","request":` + request + `}`)
	}
	pod := func(labels, image string) string {
		return `{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","kind":{"group":"","version":"v1","kind":"Pod"},` +
			`"resource":{"group":"","version":"v1","resource":"pods"},"name":"p","namespace":"default","operation":"CREATE",` +
			`"userInfo":{"username":"alice","groups":["system:authenticated"]},` +
			`"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default","labels":` + labels + `},` +
			`"spec":{"containers":[{"name":"c","image":"` + image + `"}]}},"oldObject":null,"dryRun":false,` +
			`"options":{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions"}}`
	}
	for i := range fuzzPaths {
		f.Add(uint8(i), review("admission.k8s.io/v1", pod(`{"owner":"a"}`, "nginx:latest")))
	}
	f.Add(uint8(1), review("admission.k8s.io/v1", pod(`{"owner":"a","team":"x"}`, "nginx:1.27")))
	f.Add(uint8(1), review("admission.k8s.io/v1beta1", pod(`null`, "nginx")))
	f.Add(uint8(0), review("admission.k8s.io/v1", `{"object":{"spec":{"containers":[{"image":"a/b:latest"}]}},"uid":"x"}`))
	f.Add(uint8(1), review("admission.k8s.io/v1", `{"uid":"u","object":{"metadata":{"labels":{"owner":"o"}}},"UID":"v"}`))
	f.Add(uint8(1), review("admission.k8s.io/v1", `{"uid":"u","object":[]}`))
	f.Add(uint8(0), review("admission.k8s.io/v1", `{"uid":5}`))
	f.Add(uint8(0), review("admission.k8s.io/v2", `{"uid":"u"}`))
	f.Add(uint8(0), review("admission.k8s.io/v1", `null`))
	f.Add(uint8(0), []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"`))
	fuzzServer(f)
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		s := fuzzServer(t)
		path := fuzzPaths[int(which)%len(fuzzPaths)]
		status, header, out := postReview(s, path, body)

		// A path naming no loaded policy is answered before the body is read (the body waits
		// for a worker of the policy's share), so it is 404 whatever the body holds.
		if path == "/validate/absent" {
			if status != http.StatusNotFound {
				t.Fatalf("unknown policy answered %d (want 404): %s", status, out)
			}
			return
		}
		env, wantUID, ambiguous, valid := expectedReview(body)
		if ambiguous && status == http.StatusBadRequest {
			return
		}
		if !valid {
			if status != http.StatusBadRequest {
				t.Fatalf("%s: invalid review answered %d (want 400): %s", path, status, out)
			}
			return
		}
		if status != http.StatusOK || header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: valid review answered %d %q: %s", path, status, header.Get("Content-Type"), out)
		}
		var got admissionv1.AdmissionReview
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("%s: response is not an AdmissionReview: %v: %s", path, err, out)
		}
		r := got.Response
		if got.APIVersion != env.APIVersion || got.Kind != "AdmissionReview" || r == nil || got.Request != nil {
			t.Fatalf("%s: malformed AdmissionReview for a %s request: %s", path, env.APIVersion, out)
		}
		if !ambiguous && string(r.UID) != wantUID {
			t.Fatalf("%s: response uid %q, request uid %q", path, r.UID, wantUID)
		}
		if !r.Allowed && (r.Result == nil || r.Result.Status != metav1.StatusFailure || r.Result.Code == 0) {
			t.Fatalf("%s: a denial without a failure status and code: %s", path, out)
		}
		if path == "/validate/monitor-team" && !r.Allowed {
			t.Fatalf("monitor mode denied: %s", out)
		}
		if r.Patch != nil || r.PatchType != nil {
			checkPatch(t, path, env.Request, r)
		}

		if status2, _, out2 := postReview(s, path, body); status2 != status || !bytes.Equal(out, out2) {
			t.Fatalf("%s: the same review answered differently:\n%d %s\n%d %s", path, status, out, status2, out2)
		}
	})
}

func postReview(s *Server, path string, body []byte) (int, http.Header, []byte) {
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
	return rec.Code, rec.Header(), rec.Body.Bytes()
}

// checkPatch holds a patch to what kube-apiserver accepts: only a mutating policy's validate
// path answers one, it is a JSONPatch allowing the request, and it applies to the object.
func checkPatch(t *testing.T, path string, request json.RawMessage, r *admissionv1.AdmissionResponse) {
	t.Helper()
	if path != "/validate/default-team" || !r.Allowed || r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch || len(r.Patch) == 0 {
		t.Fatalf("%s: unexpected patch (allowed %v, type %v): %s", path, r.Allowed, r.PatchType, r.Patch)
	}
	var req struct {
		Object json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(request, &req); err != nil {
		t.Fatalf("%s: patched a request whose object does not decode: %v", path, err)
	}
	patch, err := jsonpatch.DecodePatch(r.Patch)
	if err != nil {
		t.Fatalf("%s: patch is not a JSONPatch: %v: %s", path, err, r.Patch)
	}
	patched, err := patch.Apply(req.Object)
	if err != nil {
		t.Fatalf("%s: patch %s does not apply to the object %s: %v", path, r.Patch, req.Object, err)
	}
	var obj struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(patched, &obj); err != nil || obj.Metadata.Labels["team"] == "" {
		t.Fatalf("%s: the patched object does not carry the defaulted label (%v): %s", path, err, patched)
	}
}

// envelope is the part of an AdmissionReview FuzzAdmissionReview's expectations read.
type envelope struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Request    json.RawMessage `json:"request"`
}

// expectedReview decides, independently of the server's decoder, whether body is a review the
// server must evaluate, and which uid its response must carry. A request that names its uid
// ambiguously (twice, or in another letter case), which kube-apiserver never sends, is
// ambiguous: then either answer is right as long as it is well formed.
func expectedReview(body []byte) (env envelope, uid string, ambiguous, valid bool) {
	if err := json.Unmarshal(body, &env); err != nil || env.Kind != "AdmissionReview" ||
		(env.APIVersion != "admission.k8s.io/v1" && env.APIVersion != "admission.k8s.io/v1beta1") {
		return env, "", false, false
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(env.Request, &fields); err != nil || fields == nil {
		return env, "", false, false
	}
	if n := countTopLevelUIDKeys(env.Request); n > 1 || (n == 1 && fields["uid"] == nil) {
		return env, "", true, true
	}
	if v, ok := fields["uid"]; ok {
		var s *string
		if err := json.Unmarshal(v, &s); err != nil {
			return env, "", false, false
		}
		if s != nil {
			uid = *s
		}
	}
	return env, uid, false, true
}

// countTopLevelUIDKeys counts the request's top-level keys that spell uid in any case, repeats
// included.
func countTopLevelUIDKeys(request json.RawMessage) int {
	dec := json.NewDecoder(bytes.NewReader(request))
	if _, err := dec.Token(); err != nil {
		return -1
	}
	n := 0
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return -1
		}
		if strings.EqualFold(k.(string), "uid") {
			n++
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return -1
		}
	}
	return n
}
