package policyserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"regent.dev/regent/policyserver/internal/guests"
	"regent.dev/regent/tlsreload"
)

const slowAndFast = `
spin:
  module: wapc-misbehave.wasm
  timeoutSeconds: 3
  settings: {behaviour: loop}
labels:
  module: wapc-labels.wasm
  settings: {required: [team]}
`

// slowAndFastModules writes the two guests slowAndFast names (nothing outside the repository).
func slowAndFastModules(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"wapc-labels", "wapc-misbehave"} {
		b, err := guests.Build(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".wasm"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestServer_SlowPolicySaturated_AnotherPolicyStillAnswers saturates the slow policy — its
// share of the workers busy, its queue full — so its next request is turned away at once, and
// another policy's request is answered while the slow evaluations still run: no policy can take
// every worker. The spinning policy has no history yet, so its second request borrows the other
// worker; the borrowed evaluation is cut at the borrow limit and waits again in the policy's own
// share, which is what frees the worker for the other policy.
func TestServer_SlowPolicySaturated_AnotherPolicyStillAnswers(t *testing.T) {
	ts := newTestServerWith(t, slowAndFastModules(t), slowAndFast, Options{Workers: 2, PolicyQueue: 1})
	req := podRequest(t, "default", map[string]string{"team": "a"})
	answered := make(chan int, 3)
	for range 3 {
		go func() { status, _, _ := ts.post(t, "/validate/spin", req); answered <- status }()
	}
	// Saturated: one spin evaluation runs, one borrowed the other worker, the third was turned away.
	waitFor(t, func() bool { return len(answered) == 1 })
	if s := <-answered; s != http.StatusTooManyRequests {
		t.Fatalf("the slow policy's request beyond its share got %d, want 429 at once", s)
	}
	waitFor(t, func() bool { return value(t, ts.metrics.borrowed.WithLabelValues("spin", "cut")) == 1 })
	waitFor(t, func() bool { return len(ts.workers) == 1 })

	status, resp, raw := ts.post(t, "/validate/labels", req)
	if status != http.StatusOK || !resp.Allowed {
		t.Fatalf("the other policy answered %d %s", status, raw)
	}
	if n := value(t, ts.metrics.evaluations.WithLabelValues("spin", "protect", "error")); n != 0 {
		t.Fatalf("the other policy was answered only after %v slow evaluation(s) ended: it waited behind them", n)
	}
	if held := len(ts.workers); held > 1 {
		t.Fatalf("the spinning policy holds %d workers after its borrowed evaluation was cut, want its share: 1", held)
	}
	// The cut request is answered too, once its turn in the policy's own share came: its
	// evaluation times out there, which denies it (fail closed).
	for range 2 {
		if s := <-answered; s != http.StatusOK {
			t.Fatalf("a spin request got %d, want an answer (a timeout denial)", s)
		}
	}
	if n := value(t, ts.metrics.evaluations.WithLabelValues("spin", "protect", "error")); n != 2 {
		t.Fatalf("%v spin evaluations ended in error, want both answered requests", n)
	}
}

// TestServer_ACutEvaluationWithNoPlaceToRunAgainIsTurnedAwayNotDenied: the spinning policy's
// second request borrows the other worker, is cut, and its own share's line is now over the time
// bound (the cut lifted the policy's average): the request is answered 429, as one that found no
// place at first, never with a denial the policy did not give.
func TestServer_ACutEvaluationWithNoPlaceToRunAgainIsTurnedAwayNotDenied(t *testing.T) {
	ts := newTestServerWith(t, slowAndFastModules(t), slowAndFast, Options{Workers: 2, PolicyQueue: 1, PolicyQueueWait: time.Millisecond})
	req := podRequest(t, "default", map[string]string{"team": "a"})
	first := make(chan int, 1)
	go func() { status, _, _ := ts.post(t, "/validate/spin", req); first <- status }()
	waitFor(t, func() bool { return len(ts.workers) == 1 })

	status, _, body := ts.post(t, "/validate/spin", req)
	if status != http.StatusTooManyRequests || !strings.Contains(body, "policy spin is saturated") {
		t.Fatalf("the cut request got %d %q, want 429 saying the policy is saturated", status, body)
	}
	if n := value(t, ts.metrics.borrowed.WithLabelValues("spin", "cut")); n != 1 {
		t.Fatalf("%v borrowed evaluations cut, want the second request's", n)
	}
	for _, outcome := range []string{"accepted", "rejected", "error"} {
		if n := value(t, ts.metrics.evaluations.WithLabelValues("spin", "protect", outcome)); n != 0 {
			t.Fatalf("%v evaluations counted %s while the only finished request was turned away", n, outcome)
		}
	}
	if s := <-first; s != http.StatusOK {
		t.Fatalf("the request in the policy's own share got %d, want an answer (a timeout denial)", s)
	}
}

// countingBody records whether the handler started reading the request body.
type countingBody struct {
	*bytes.Reader
	reads atomic.Int32
}

func (b *countingBody) Read(p []byte) (int, error) {
	b.reads.Add(1)
	return b.Reader.Read(p)
}

func (b *countingBody) Close() error { return nil }

// TestServer_BodyIsReadOnlyAfterAWorkerSlotIsTaken: a request waiting for a worker holds no
// body in memory (up to 8 MiB each), only its headers.
func TestServer_BodyIsReadOnlyAfterAWorkerSlotIsTaken(t *testing.T) {
	ts := newTestServerWith(t, slowAndFastModules(t), slowAndFast, Options{Workers: 1})
	req := podRequest(t, "default", map[string]string{"team": "a"})
	spun := make(chan struct{})
	go func() { ts.post(t, "/validate/spin", req); close(spun) }()
	waitFor(t, func() bool { return len(ts.workers) == 1 })

	review, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": json.RawMessage(req)})
	body := &countingBody{Reader: bytes.NewReader(review)}
	r := httptest.NewRequest(http.MethodPost, "/validate/labels", body)
	w := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { ts.Handler().ServeHTTP(w, r); close(done) }()
	waitFor(t, func() bool { return ts.waiting.Load() == 1 })
	if n := body.reads.Load(); n != 0 {
		t.Fatalf("the body was read (%d reads) while the request waited for a worker", n)
	}
	<-done
	<-spun
	if w.Code != http.StatusOK || body.reads.Load() == 0 {
		t.Fatalf("once a worker was free: %d %s (reads %d)", w.Code, w.Body, body.reads.Load())
	}
}

// value reads a gauge or counter.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Gauge != nil {
		return d.Gauge.GetValue()
	}
	return d.Counter.GetValue()
}

// TestAdmissionServer_EveryPhaseOfAConnectionIsBounded: headers, the whole request (body
// included), the answer and an idle keep-alive each have a limit, as does the header size.
func TestAdmissionServer_EveryPhaseOfAConnectionIsBounded(t *testing.T) {
	srv := admissionServer(http.NotFoundHandler(), &tlsreload.Reloader{})
	for name, d := range map[string]time.Duration{
		"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout,
		"WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout,
	} {
		if d <= 0 {
			t.Errorf("%s is not set: a slow client holds the connection forever", name)
		}
	}
	if srv.ReadTimeout > 30*time.Second {
		t.Errorf("ReadTimeout %v is beyond the 30s kube-apiserver waits for a webhook", srv.ReadTimeout)
	}
	if srv.MaxHeaderBytes <= 0 || srv.MaxHeaderBytes > 1<<20 {
		t.Errorf("MaxHeaderBytes %d", srv.MaxHeaderBytes)
	}
}
