package admissionpolicy

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
)

// pathRecorder is a stand-in policy server that admits everything and records which
// /validate/<policy>/<generation> the apiserver called.
type pathRecorder struct {
	mu    sync.Mutex
	paths []string
}

func (p *pathRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	review := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(r.Body).Decode(review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.paths = append(p.paths, r.URL.Path)
	p.mu.Unlock()
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	_ = json.NewEncoder(w).Encode(review)
}

func (p *pathRecorder) last() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.paths) == 0 {
		return ""
	}
	return p.paths[len(p.paths)-1]
}

func TestWebhook_RealApiserverCallsTheServingGeneration(t *testing.T) {
	t.Parallel()
	server := &pathRecorder{}
	srv := httptest.NewTLSServer(server)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config, func(o *Options) {
		o.WebhookURL = func(string) string { return srv.URL }
		o.CABundle = func(context.Context, string) ([]byte, error) { return ca, nil }
	})
	ctx := context.Background()
	liveLeases(t, c, "call", 0, 1)
	p := clusterPolicy("call", "call")
	fail := admissionregistrationv1.Fail
	p.Spec.FailurePolicy = &fail
	p.Spec.Rules[0].Resources = []string{"configmaps"}
	p.Spec.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"regent-test": "call"}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	report(t, c, "clusterwide-call-g1", append(readyOn(metav1.ConditionTrue, 0, 1), initializedTrue())...)
	waitForPolicy(t, c, "call", "serving 1", func(q *kubewardenv1.ClusterAdmissionPolicy) bool { return q.Status.ServingGeneration == 1 })

	n := 0
	// The apiserver picks up webhook configurations asynchronously: send requests until the
	// expected generation answers.
	calledAt := func(path string) func() bool {
		return func() bool {
			n++
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("cm-%d", n),
				Labels: map[string]string{"regent-test": "call"}}}
			if err := c.Create(ctx, cm); err != nil && !strings.Contains(err.Error(), "failed calling webhook") {
				t.Fatal(err)
			}
			return server.last() == path
		}
	}
	eventually(t, "the apiserver calls generation 1", calledAt("/validate/clusterwide-call/1"))

	update(t, c, p, func() { p.Spec.Module = "file:///policies/v2.wasm" })
	report(t, c, "clusterwide-call-g2", append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
	waitForPolicy(t, c, "call", "Ready on replica 0 for generation 2", func(q *kubewardenv1.ClusterAdmissionPolicy) bool {
		return q.Generation == 2 && readyReplicas(q.Status, metav1.ConditionTrue) == "0"
	})
	if !calledAt("/validate/clusterwide-call/1")() {
		t.Errorf("with replica 1 not Ready the apiserver called %s", server.last())
	}
	report(t, c, "clusterwide-call-g2", readyOn(metav1.ConditionTrue, 1)...)
	eventually(t, "the apiserver calls generation 2", calledAt("/validate/clusterwide-call/2"))
}
