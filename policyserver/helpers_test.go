package policyserver

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"regent.dev/regent/policyserver/internal/guests"
)

// testModules writes the guest policies where a policies file can name them and returns the
// directory.
func testModules(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"wapc-labels", "wapc-misbehave", "wasi-privileged", "wapc-context"} {
		b, err := guests.Build(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".wasm"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := guests.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "policyserver", "testdata", "rego", "disallow-latest.rego"))
	if err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(dir, "disallow-latest.rego"), src, 0o644)
	tmpl, err := os.ReadFile(filepath.Join(root, "policyserver", "testdata", "gatekeeper", "requiredlabels", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(dir, "requiredlabels.yaml"), tmpl, 0o644)
	return dir
}

// writeConfig writes a policies file into dir from YAML.
func writeConfig(t testing.TB, dir, doc string) string {
	t.Helper()
	path := filepath.Join(dir, "policies.yml")
	if err := os.WriteFile(path+".tmp", []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	return path
}

const allRuntimes = `
privileged:
  module: wasi-privileged.wasm
  executionMode: wasi
  settings: {skipNamespaces: [kube-system]}
labels:
  module: wapc-labels.wasm
  settings: {required: [team]}
default-team:
  module: wapc-labels.wasm
  mutating: true
  settings: {required: [team], defaults: {team: platform}}
latest:
  module: disallow-latest.rego
  executionMode: opa
owner:
  module: requiredlabels.yaml
  executionMode: gatekeeper
  settings: {labels: [{key: owner}]}
`

type testServer struct {
	*Server
	url    string
	client *http.Client
	// caPEM is what an apiserver's webhook configuration needs to trust the server.
	caPEM []byte
}

func newTestServer(t testing.TB, dir, config string) *testServer {
	t.Helper()
	return newTestServerWith(t, dir, config, Options{})
}

// newTestServerWith is newTestServer with opts (its CacheDir is set here).
func newTestServerWith(t testing.TB, dir, config string, opts Options) *testServer {
	t.Helper()
	cacheDir, err := guests.CacheDir("wazero")
	if err != nil {
		t.Fatal(err)
	}
	opts.CacheDir = cacheDir
	s, err := NewServer(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	if config != "" {
		cfg, err := ReadConfig(writeConfig(t, dir, config))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Apply(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewTLSServer(s.Handler())
	t.Cleanup(hs.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw})
	return &testServer{Server: s, url: hs.URL, client: hs.Client(), caPEM: ca}
}

// post sends an AdmissionReview for request to path and returns the status and the response.
func (ts *testServer) post(t testing.TB, path string, request []byte) (int, *admissionv1.AdmissionResponse, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": json.RawMessage(request),
	})
	resp, err := ts.client.Post(ts.url+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil, string(raw)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(raw, &review); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" || review.Response == nil {
		t.Fatalf("not an AdmissionReview v1 response: %s", raw)
	}
	return resp.StatusCode, review.Response, string(raw)
}

func podRequest(t testing.TB, namespace string, labels map[string]string, containers ...map[string]any) []byte {
	t.Helper()
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": namespace, "labels": labels},
		"spec":     map[string]any{"containers": containers},
	}
	b, err := json.Marshal(map[string]any{
		"uid":       "705ab4f5-6393-11e8-b7cc-42010a800002",
		"kind":      map[string]any{"group": "", "version": "v1", "kind": "Pod"},
		"resource":  map[string]any{"group": "", "version": "v1", "resource": "pods"},
		"operation": "CREATE", "namespace": namespace, "name": "p",
		"userInfo": map[string]any{"username": "alice"},
		"object":   pod,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func container(name, image string, privileged bool) map[string]any {
	c := map[string]any{"name": name, "image": image}
	if privileged {
		c["securityContext"] = map[string]any{"privileged": true}
	}
	return c
}

func message(r *admissionv1.AdmissionResponse) string {
	if r.Result == nil {
		return ""
	}
	return r.Result.Message
}
