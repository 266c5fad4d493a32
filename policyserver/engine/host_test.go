package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingHost answers get_resource for a Namespace with the labels it holds, and remembers
// what it was asked. The Kubernetes side is tested against a real apiserver in package
// capabilities; this host only checks the engine's half of the ABI.
type recordingHost struct {
	labels map[string]string
	delay  time.Duration // ignoring ctx, as a client that takes none would

	mu    sync.Mutex
	calls []HostCall
}

func (h *recordingHost) Call(ctx context.Context, c HostCall) ([]byte, error) {
	h.mu.Lock()
	h.calls = append(h.calls, c)
	h.mu.Unlock()
	time.Sleep(h.delay)
	switch c.Capability() {
	case "kubewarden/kubernetes/get_resource":
		return json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"labels": h.labels}})
	case "kubewarden/tracing/log":
		return nil, nil
	}
	return nil, errors.New("no such capability here")
}

func TestWaPC_HostCall_GuestGetsTheHostsAnswer_WithItsPolicyAndAllowlist(t *testing.T) {
	host := &recordingHost{labels: map[string]string{"team": "a"}}
	e := newTestEngine(t, Options{Host: host})
	allowed := []Resource{{APIVersion: "v1", Kind: "Namespace"}}
	p := load(t, e, Spec{Name: "ctx", Module: guest(t, "wapc-context"), ContextAwareResources: allowed,
		Settings: json.RawMessage(`{"namespaceLabel":"team"}`)})

	if r := validate(t, p, podRequest(t, "shop", nil, container("c", "nginx:1", false))); !r.Accepted {
		t.Fatalf("namespace labelled team: want acceptance, got %+v", r)
	}
	host.labels = map[string]string{"other": "x"}
	r := validate(t, p, podRequest(t, "shop", nil, container("c", "nginx:1", false)))
	if r.Accepted || r.Message != "namespace shop lacks the label team" {
		t.Fatalf("namespace without team: want the policy's denial, got %+v", r)
	}

	host.mu.Lock()
	defer host.mu.Unlock()
	get := host.calls[0]
	var payload map[string]any
	if err := json.Unmarshal(get.Payload, &payload); err != nil {
		t.Fatal(err)
	}
	if get.Policy != "ctx" || len(get.Allowed) != 1 || get.Allowed[0] != allowed[0] ||
		payload["api_version"] != "v1" || payload["kind"] != "Namespace" || payload["name"] != "shop" {
		t.Fatalf("host saw %+v with payload %s", get, get.Payload)
	}
	if host.calls[1].Capability() != "kubewarden/tracing/log" {
		t.Fatalf("second call %s, want the guest's log line", host.calls[1].Capability())
	}
}

func TestWaPC_HostCall_WithoutHost_GuestIsToldTheServerHasNone(t *testing.T) {
	e := newTestEngine(t, Options{})
	p := load(t, e, Spec{Module: guest(t, "wapc-context"), Settings: json.RawMessage(`{"namespaceLabel":"team"}`)})
	r := validate(t, p, podRequest(t, "shop", nil, container("c", "nginx:1", false)))
	want := "cannot read namespace shop: host capability kubewarden/kubernetes/get_resource is not available: this policy server was started without host capabilities"
	if r.Accepted || r.Message != want {
		t.Fatalf("want denial %q, got %+v", want, r)
	}
}

func TestWaPC_HostCall_SlowHost_IsCutOffAtThePolicyTimeout_NamingTheCapability(t *testing.T) {
	host := &recordingHost{delay: 5 * time.Second}
	e := newTestEngine(t, Options{Host: host})
	p := load(t, e, Spec{Module: guest(t, "wapc-context"), Timeout: 300 * time.Millisecond,
		Settings: json.RawMessage(`{"namespaceLabel":"team"}`)})
	start := time.Now()
	_, err := p.Validate(context.Background(), podRequest(t, "shop", nil, container("c", "nginx:1", false)))
	took := time.Since(start)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "(limit 300ms), waiting for host capability kubewarden/kubernetes/get_resource") {
		t.Fatalf("want a timeout naming the capability, got %v", err)
	}
	if took > 2*time.Second {
		t.Fatalf("answered after %s: the host's 5s delay held the request", took)
	}
}
