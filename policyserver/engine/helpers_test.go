package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"regent.dev/regent/policyserver/internal/guests"
)

func newTestEngine(t testing.TB, opts Options) *Engine {
	t.Helper()
	if opts.CacheDir == "" {
		dir, err := guests.CacheDir("wazero")
		if err != nil {
			t.Fatal(err)
		}
		opts.CacheDir = dir
	}
	e, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

var (
	guestMu    sync.Mutex
	guestCache = map[string][]byte{}
)

func guest(t testing.TB, name string) []byte {
	t.Helper()
	guestMu.Lock()
	defer guestMu.Unlock()
	if b, ok := guestCache[name]; ok {
		return b
	}
	b, err := guests.Build(name)
	if err != nil {
		t.Fatal(err)
	}
	guestCache[name] = b
	return b
}

func regoModule(t testing.TB, file, entrypoint string) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "testdata", "rego", file))
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := CompileRego(context.Background(), map[string]string{file: string(src)}, entrypoint, false)
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}

func load(t testing.TB, e *Engine, spec Spec) *Policy {
	t.Helper()
	if spec.Name == "" {
		spec.Name = t.Name()
	}
	p, err := e.Load(context.Background(), spec)
	if err != nil {
		t.Fatalf("load %s: %v", spec.Name, err)
	}
	t.Cleanup(p.Close)
	return p
}

// podRequest is the AdmissionRequest JSON for creating a pod.
func podRequest(t testing.TB, namespace string, labels map[string]string, containers ...map[string]any) []byte {
	t.Helper()
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": namespace, "labels": labels},
		"spec":     map[string]any{"containers": containers},
	}
	req := map[string]any{
		"uid":       "705ab4f5-6393-11e8-b7cc-42010a800002",
		"kind":      map[string]any{"group": "", "version": "v1", "kind": "Pod"},
		"resource":  map[string]any{"group": "", "version": "v1", "resource": "pods"},
		"operation": "CREATE", "namespace": namespace, "name": "p",
		"userInfo": map[string]any{"username": "alice"},
		"object":   pod,
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func container(name, image string, privileged bool) map[string]any {
	c := map[string]any{"name": name, "image": image}
	if privileged {
		c["securityContext"] = map[string]any{"privileged": true}
	}
	return c
}

func validate(t testing.TB, p *Policy, req []byte) Response {
	t.Helper()
	r, err := p.Validate(context.Background(), req)
	if err != nil {
		t.Fatalf("validate: %v", err)
	}
	return r
}
