package capabilities

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"regent.dev/regent/policyserver/engine"
)

func netCall(t *testing.T, h *Host, payload string) ([]byte, error) {
	t.Helper()
	return h.Call(context.Background(), engine.HostCall{Binding: "kubewarden", Namespace: "net", Operation: "v1/dns_lookup_host", Payload: []byte(payload)})
}

func TestNet_DNSLookupHost_AnswersTheResolversAddresses(t *testing.T) {
	h, _ := New(Options{})
	raw, err := netCall(t, h, `"localhost"`)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		IPs []string `json:"ips"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(out.IPs, "127.0.0.1") && !slices.Contains(out.IPs, "::1") {
		t.Fatalf("localhost resolved to %v", out.IPs)
	}
	if _, err := netCall(t, h, `"no-such-host.invalid"`); err == nil || !strings.Contains(err.Error(), "no-such-host.invalid") {
		t.Fatalf("an unknown host: want an error naming it, got %v", err)
	}
	if _, err := netCall(t, h, `{"host":"localhost"}`); err == nil || !strings.Contains(err.Error(), "payload must be a host name as a JSON string") {
		t.Fatalf("a malformed payload: got %v", err)
	}
}
