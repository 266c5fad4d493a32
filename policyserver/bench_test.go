package policyserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
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
