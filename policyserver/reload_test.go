package policyserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"regent.dev/regent/policyserver/internal/guests"
	"regent.dev/regent/policyserver/registry"
	"regent.dev/regent/policyserver/selfsigned"
)

// TestServer_ReplaceAndRemoveDuringLoad keeps requests flowing while the policies file flips a
// policy's settings back and forth and adds and removes another: no request to the policy that
// stays fails, and each sees either the old or the new settings.
func TestServer_ReplaceAndRemoveDuringLoad(t *testing.T) {
	dir := testModules(t)
	configA := `
labels:
  module: wapc-labels.wasm
  settings: {required: [team]}
`
	configB := `
labels:
  module: wapc-labels.wasm
  settings: {required: [tier]}
extra:
  module: disallow-latest.rego
  executionMode: opa
`
	ts := newTestServer(t, dir, configA)
	req := podRequest(t, "default", map[string]string{"app": "x"})

	var (
		wg                     sync.WaitGroup
		stop                   = make(chan struct{})
		sawA, sawB, bad, total atomic.Int64
		badMu                  sync.Mutex
		badExample             string
	)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				status, resp, raw := ts.post(t, "/validate/labels", req)
				total.Add(1)
				switch {
				case status == http.StatusOK && message(resp) == "missing required labels: team":
					sawA.Add(1)
				case status == http.StatusOK && message(resp) == "missing required labels: tier":
					sawB.Add(1)
				default:
					bad.Add(1)
					badMu.Lock()
					badExample = raw
					badMu.Unlock()
				}
			}
		})
	}
	for i := range 6 {
		doc := configA
		if i%2 == 0 {
			doc = configB
		}
		cfg, err := ReadConfig(writeConfig(t, dir, doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := ts.Apply(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if bad.Load() != 0 || sawA.Load() == 0 || sawB.Load() == 0 {
		t.Fatalf("of %d requests: %d old, %d new, %d failed (e.g. %s)", total.Load(), sawA.Load(), sawB.Load(), bad.Load(), badExample)
	}
	if keys := ts.Loaded(); len(keys) != 1 || keys[0] != (registry.Key{Name: "labels", Generation: 7}) {
		t.Fatalf("after the last (A) config, want only labels generation 7, got %v", keys)
	}
	if status, _, _ := ts.post(t, "/validate/extra", req); status != http.StatusNotFound {
		t.Fatalf("removed policy: want 404, got %d", status)
	}
}

func TestServer_FailedReloadKeepsThePreviousRevisionServing(t *testing.T) {
	dir := testModules(t)
	ts := newTestServer(t, dir, `
labels:
  module: wapc-labels.wasm
  settings: {required: [team]}
`)
	cfg, err := ReadConfig(writeConfig(t, dir, `
labels:
  module: wapc-labels.wasm
  settings: {required: []}
`))
	if err != nil {
		t.Fatal(err)
	}
	err = ts.Apply(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "policy labels: settings rejected by the policy") {
		t.Fatalf("want the settings error, got %v", err)
	}
	if _, resp, raw := ts.post(t, "/validate/labels", podRequest(t, "default", nil)); message(resp) != "missing required labels: team" {
		t.Fatalf("the previous revision must keep serving, got %s", raw)
	}
}

func TestServer_ExplicitGenerationsServeSideBySide(t *testing.T) {
	dir := testModules(t)
	ts := newTestServer(t, dir, "")
	load := func(gen int64, label string) {
		err := ts.LoadRevision(context.Background(), registry.Key{Name: "labels", Generation: gen}, PolicyConfig{
			Module: filepath.Join(dir, "wapc-labels.wasm"), Settings: []byte(`{"required":["` + label + `"]}`)})
		if err != nil {
			t.Fatal(err)
		}
	}
	load(3, "three")
	load(4, "four")
	req := podRequest(t, "default", nil)
	for path, want := range map[string]string{
		"/validate/labels/3": "missing required labels: three",
		"/validate/labels/4": "missing required labels: four",
		"/validate/labels":   "missing required labels: four",
	} {
		if _, resp, raw := ts.post(t, path, req); message(resp) != want {
			t.Errorf("%s: want %q, got %s", path, want, raw)
		}
	}
	ts.UnloadRevision(registry.Key{Name: "labels", Generation: 4})
	if _, resp, raw := ts.post(t, "/validate/labels", req); message(resp) != "missing required labels: three" {
		t.Errorf("latest after unloading 4: got %s", raw)
	}
}

// TestRun_ServesHTTPSReloadsCertificatesAndPolicies runs the server as the command does and
// rotates both its certificate and its policies file underneath it.
func TestRun_ServesHTTPSReloadsCertificatesAndPolicies(t *testing.T) {
	dir := testModules(t)
	certDir := t.TempDir()
	first, err := selfsigned.Write(certDir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cacheDir, _ := guests.CacheDir("wazero")
	policies := writeConfig(t, dir, "labels:\n  module: wapc-labels.wasm\n  settings: {required: [team]}\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Listener: ln, CertFile: first.CertFile, KeyFile: first.KeyFile,
			PoliciesFile: policies, ReloadInterval: 50 * time.Millisecond, CacheDir: cacheDir})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	url := "https://" + ln.Addr().String()
	ts := &testServer{url: url, client: clientTrusting(first.CAPEM)}
	waitFor(t, func() bool {
		resp, err := ts.client.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	if _, resp, raw := ts.post(t, "/validate/labels", podRequest(t, "default", nil)); message(resp) != "missing required labels: team" {
		t.Fatalf("got %s", raw)
	}

	writeConfig(t, dir, "labels:\n  module: wapc-labels.wasm\n  settings: {required: [tier]}\n")
	waitFor(t, func() bool {
		_, resp, _ := ts.post(t, "/validate/labels", podRequest(t, "default", nil))
		return resp != nil && message(resp) == "missing required labels: tier"
	})

	second, err := selfsigned.Write(certDir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	newClient := clientTrusting(second.CAPEM)
	waitFor(t, func() bool {
		resp, err := newClient.Get(url + "/livez")
		if err != nil {
			newClient.CloseIdleConnections()
			return false
		}
		resp.Body.Close()
		return true
	})
}

func clientTrusting(caPEM []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// waitFor polls cond; the deadline is generous because the machine is shared, and nothing here
// asserts a duration.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
