package policyserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"regent.dev/regent/policyserver/internal/guests"
)

// BenchmarkServer_Validate measures the whole /validate path in process (HTTPS, AdmissionReview
// decode, evaluation, encode) per runtime with parallel clients.
func BenchmarkServer_Validate(b *testing.B) {
	ts := newTestServer(b, testModules(b), allRuntimes)
	// One kept-alive connection per client goroutine, as a webhook caller has; the default of 2
	// idle connections would measure TLS handshakes instead.
	ts.client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	req := podRequest(b, "default", map[string]string{"team": "a", "owner": "me"},
		container("web", "nginx:1.27", false), container("proxy", "envoy:1.30", false))
	body, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": json.RawMessage(req)})
	for _, policy := range []string{"labels", "latest", "owner"} {
		b.Run(policy, func(b *testing.B) {
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := ts.client.Post(ts.url+"/validate/"+policy, "application/json", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}

// BenchmarkServer_Handler measures the server's own work per request, without TLS, sockets or a
// client in the same process: the handler from the routed request to the written answer
// (decode, slot, evaluation, metrics, encode). Its ns/op and allocs/op are the server's CPU per
// request minus transport.
func BenchmarkServer_Handler(b *testing.B) {
	dir := testModules(b)
	fast, err := guests.Build("wapc-labels-fastjson")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wapc-labels-fastjson.wasm"), fast, 0o644); err != nil {
		b.Fatal(err)
	}
	ts := newTestServer(b, dir, allRuntimes+`
labels-fastjson:
  module: wapc-labels-fastjson.wasm
  settings: {required: [team]}
`)
	req := podRequest(b, "default", map[string]string{"team": "a", "owner": "me"},
		container("web", "nginx:1.27", false), container("proxy", "envoy:1.30", false))
	body, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": json.RawMessage(req)})
	h := ts.Handler()
	for _, policy := range []string{"latest", "labels-fastjson", "labels"} {
		b.Run(policy, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/validate/"+policy, bytes.NewReader(body))
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(`"allowed":true`)) {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
