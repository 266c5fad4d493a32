package policyserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/go-logr/logr"

	"regent.dev/regent/policyserver/engine"
	"regent.dev/regent/policyserver/internal/guests"
)

// TestServer_BeyondTheQueueRequestsAreTurnedAwayWith429 fills the only worker with a slow
// evaluation and the queue with one waiting request (of another policy: a policy's own requests
// wait in its share first): the next request is refused at once instead of piling up
// goroutines, and the queued one is still served.
func TestServer_BeyondTheQueueRequestsAreTurnedAwayWith429(t *testing.T) {
	dir := slowAndFastModules(t)
	cacheDir, _ := guests.CacheDir("wazero")
	e, err := engine.New(context.Background(), engine.Options{CacheDir: cacheDir, MaxInstancesPerPolicy: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(e, newMetrics(), concurrency{workers: 1, maxQueue: 1, policyWorkers: 1, policyQueue: 2}, logr.Discard())
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	cfg, err := ReadConfig(writeConfig(t, dir, `
spin:
  module: wapc-misbehave.wasm
  timeoutSeconds: 1
  settings: {behaviour: loop}
spin-b:
  module: wapc-misbehave.wasm
  timeoutSeconds: 1
  settings: {behaviour: loop}
spin-c:
  module: wapc-misbehave.wasm
  timeoutSeconds: 1
  settings: {behaviour: loop}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewTLSServer(s.Handler())
	t.Cleanup(hs.Close)
	ts := &testServer{Server: s, url: hs.URL, client: hs.Client()}
	req := podRequest(t, "default", nil)

	var wg sync.WaitGroup
	statuses := make(chan int, 2)
	wg.Go(func() { status, _, _ := ts.post(t, "/validate/spin", req); statuses <- status })
	waitFor(t, func() bool { return len(s.workers) == 1 })
	wg.Go(func() { status, _, _ := ts.post(t, "/validate/spin-b", req); statuses <- status })
	waitFor(t, func() bool { return s.waiting.Load() == 1 })

	status, _, body := ts.post(t, "/validate/spin-c", req)
	if status != http.StatusTooManyRequests || body != "policy server overloaded: too many requests waiting\n" {
		t.Fatalf("want 429, got %d %q", status, body)
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != http.StatusOK {
			t.Fatalf("the running and the queued request must be answered (a timeout denial), got %d", s)
		}
	}
}
