package policyserver

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver/engine"
)

func TestReadConfig_AcceptsKubewardenPoliciesYAML(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policies.yml")
	doc := `
privileged-pods:
  url: file://modules/pod-privileged.wasm
  policyMode: monitor
  allowedToMutate: true
  timeoutEvalSeconds: 3
  contextAwareResources: [{apiVersion: v1, kind: Namespace}]
  settings: {skip: true}
`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ReadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg["privileged-pods"]
	mode, _ := p.mode()
	if p.Module != filepath.Join(dir, "modules", "pod-privileged.wasm") || mode != ModeMonitor ||
		!p.AllowedToMutate || p.timeout() != 3*time.Second || string(p.Settings) != `{"skip":true}` ||
		len(p.ContextAwareResources) != 1 || p.ContextAwareResources[0] != (kubewardenv1.ContextAwareResource{APIVersion: "v1", Kind: "Namespace"}) {
		t.Fatalf("parsed %+v", p)
	}
}

func TestConfig_ContextAwareResources_ReachTheEngine_AndMustNameAKind(t *testing.T) {
	dir := t.TempDir()
	module := filepath.Join(dir, "x.wasm")
	_ = os.WriteFile(module, []byte("\x00asm\x01\x00\x00\x00"), 0o644)
	spec, err := PolicyConfig{Module: module, ContextAwareResources: []kubewardenv1.ContextAwareResource{
		{APIVersion: "v1", Kind: "Namespace"}, {APIVersion: "apps/v1", Kind: "Deployment"}}}.spec(t.Context(), "p")
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.Resource{{APIVersion: "v1", Kind: "Namespace"}, {APIVersion: "apps/v1", Kind: "Deployment"}}
	if !slices.Equal(spec.ContextAwareResources, want) {
		t.Fatalf("engine spec has %v, want %v", spec.ContextAwareResources, want)
	}
	_, err = PolicyConfig{Module: module, ContextAwareResources: []kubewardenv1.ContextAwareResource{{APIVersion: "v1"}}}.spec(t.Context(), "p")
	if err == nil || err.Error() != "contextAwareResources[0]: apiVersion and kind are both required" {
		t.Fatalf("want an error naming the incomplete entry, got %v", err)
	}
	path := filepath.Join(dir, "policies.yml")
	_ = os.WriteFile(path, []byte("p:\n  module: x.wasm\n  contextAwareResources: [{apiVersion: v1, kind: Pod, group: x}]\n"), 0o644)
	if _, err := ReadConfig(path); err == nil || !strings.Contains(err.Error(), "group") {
		t.Fatalf("want an error naming the unknown field, got %v", err)
	}
}

func TestReadConfig_TypoIsAnErrorNotSilence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policies.yml")
	_ = os.WriteFile(path, []byte("p:\n  module: x.wasm\n  mutatting: true\n"), 0o644)
	if _, err := ReadConfig(path); err == nil || !strings.Contains(err.Error(), "mutatting") {
		t.Fatalf("want an error naming the unknown field, got %v", err)
	}
}

func TestApply_RemoteModulesAndBadModesAreLoadErrors(t *testing.T) {
	dir := t.TempDir()
	ts := newTestServer(t, dir, "")
	module := filepath.Join(dir, "x.wasm")
	_ = os.WriteFile(module, []byte("\x00asm\x01\x00\x00\x00"), 0o644)
	err := ts.Apply(t.Context(), Config{
		"remote": {Module: "registry://ghcr.io/kubewarden/policies/pod-privileged:v0.2.2"},
		"mode":   {Module: module, Mode: "enforce"},
	})
	for _, want := range []string{"policy remote: module registry://", "only local files", `policy mode: unknown mode "enforce"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
	if len(ts.Loaded()) != 0 {
		t.Fatalf("nothing should be loaded, got %v", ts.Loaded())
	}
}
