package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"regent.dev/regent/policyserver/capabilities"
	"regent.dev/regent/policyserver/engine"
)

func TestFileModeCapabilities_KubeconfigIsOptional_UnlessNamed(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	host, err := fileModeCapabilities(context.Background(), "", kubeAPILimits{}, nil, nil, logr.Discard())
	if err != nil {
		t.Fatalf("no configuration anywhere must not stop the server: %v", err)
	}
	_, err = host.Call(context.Background(), engine.HostCall{Binding: "kubewarden", Namespace: "kubernetes", Operation: "get_resource",
		Allowed: []engine.Resource{{APIVersion: "v1", Kind: "Namespace"}}, Payload: []byte(`{"api_version":"v1","kind":"Namespace","name":"x"}`)})
	if !errors.Is(err, capabilities.ErrNoKubernetes) {
		t.Fatalf("lookups without a configuration: want ErrNoKubernetes, got %v", err)
	}

	if _, err := fileModeCapabilities(context.Background(), "/does/not/exist", kubeAPILimits{}, nil, nil, logr.Discard()); err == nil || !strings.HasPrefix(err.Error(), "--kubeconfig: ") {
		t.Fatalf("a named kubeconfig that cannot be read: want an error naming the flag, got %v", err)
	}

	path := filepath.Join(t.TempDir(), "kubeconfig")
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n" +
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	host, err = fileModeCapabilities(context.Background(), path, kubeAPILimits{}, nil, nil, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	_, err = host.Call(context.Background(), engine.HostCall{Binding: "kubewarden", Namespace: "kubernetes", Operation: "get_resource",
		Allowed: []engine.Resource{{APIVersion: "v1", Kind: "Namespace"}}, Payload: []byte(`{"api_version":"v1","kind":"Namespace","name":"x"}`)})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("lookups go to the kubeconfig's server: got %v", err)
	}
}

// A pod passes its IP alone ($(POD_IP)); other replicas need the listener's port with it.
func TestAdvertiseAddress_TakesThePortOfTheListener(t *testing.T) {
	for _, c := range []struct{ advertise, addr, want string }{
		{"10.0.0.5", ":8443", "10.0.0.5:8443"},
		{"fd00::5", ":8443", "[fd00::5]:8443"},
		{"10.0.0.5:9000", ":8443", "10.0.0.5:9000"},
		{"", ":8443", ""},
	} {
		got, err := advertiseAddress(c.advertise, c.addr)
		if err != nil || got != c.want {
			t.Errorf("advertiseAddress(%q, %q) = %q, %v; want %q", c.advertise, c.addr, got, err, c.want)
		}
	}
	if _, err := advertiseAddress("10.0.0.5", "no-port"); err == nil {
		t.Error("an --addr without a port was accepted")
	}
}
