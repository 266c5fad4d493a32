package capabilities

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"regent.dev/regent/policyserver/engine"
)

func TestHost_CapabilitiesNotServed_SaySo(t *testing.T) {
	h, _ := New(Options{})
	for _, tc := range []struct{ binding, namespace, operation, payload, want string }{
		{"kubewarden", "oci", "v2/verify", `{"type":"SigstoreAttestationVerify","image":"x"}`,
			`oci v2/verify "SigstoreAttestationVerify" is not served by this policy server: the variants are SigstorePubKeyVerify, SigstoreKeylessVerify, SigstoreKeylessPrefixVerify, SigstoreGithubActionsVerify and SigstoreCertificateVerify`},
		{"kubewarden", "oci", "v1/verify", `{"SigstoreAttestationVerify":{"image":"x"}}`,
			`oci v1/verify "SigstoreAttestationVerify" is not served by this policy server: the variants are SigstorePubKeyVerify, SigstoreKeylessVerify, SigstoreKeylessPrefixVerify, SigstoreGithubActionsVerify and SigstoreCertificateVerify`},
		{"kubewarden", "oci", "v1/oci_manifest_config", "", "host capability kubewarden/oci/v1/oci_manifest_config is not served by this policy server"},
		{"acme", "kv", "get", "", "host capability acme/kv/get is not served by this policy server (it serves the binding kubewarden only)"},
	} {
		_, err := h.Call(context.Background(), engine.HostCall{Binding: tc.binding, Namespace: tc.namespace, Operation: tc.operation, Payload: []byte(tc.payload)})
		if !errors.Is(err, ErrNotServed) || err.Error() != tc.want {
			t.Errorf("want %q, got %v", tc.want, err)
		}
	}
}

func TestLabelAndOutcome_KeepMetricsBounded(t *testing.T) {
	if got := Label(engine.HostCall{Binding: "kubewarden", Namespace: "kubernetes", Operation: "get_resource"}); got != "kubewarden/kubernetes/get_resource" {
		t.Errorf("a Kubewarden capability is its own label, got %s", got)
	}
	if got := Label(engine.HostCall{Binding: "kubewarden", Namespace: "x", Operation: "random-42"}); got != "other" {
		t.Errorf("a name the guest made up is other, got %s", got)
	}
	for err, want := range map[error]string{
		nil: "ok", fmt.Errorf("x: %w", ErrNotAllowed): "not_allowed", fmt.Errorf("x: %w", ErrNotServed): "not_served",
		fmt.Errorf("x: %w", ErrNoKubernetes): "no_kubernetes", fmt.Errorf("x: %w", context.DeadlineExceeded): "timeout",
		errors.New("connection refused"): "error",
	} {
		if got := Outcome(err); got != want {
			t.Errorf("Outcome(%v) = %s, want %s", err, got, want)
		}
	}
}
