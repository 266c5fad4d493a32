package cache_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/engine"
	"regent.dev/regent/policyserver/internal/guests"
	"regent.dev/regent/policyserver/lifecycle/cache"
)

// coldStartPolicies makes n distinct modules: n-1 Rego policies (each a distinct wasm) and the
// Go waPC guest, the expensive kind to compile.
func coldStartPolicies(b *testing.B, n int) (cache.Cache, []cache.Source) {
	b.Helper()
	ctx := context.Background()
	root, err := guests.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	rego, err := os.ReadFile(filepath.Join(root, "policyserver", "testdata", "rego", "disallow-latest.rego"))
	if err != nil {
		b.Fatal(err)
	}
	var srcs []cache.Source
	dir := b.TempDir()
	for i := range n - 1 {
		p := filepath.Join(dir, fmt.Sprintf("p%d.rego", i))
		_ = os.WriteFile(p, append(rego, fmt.Sprintf("\nvariant := %d\n", i)...), 0o644)
		spec, err := policyserver.PolicyConfig{Module: p, ExecutionMode: "opa"}.EngineSpec(ctx, "p")
		if err != nil {
			b.Fatal(err)
		}
		srcs = append(srcs, cache.Source{Wasm: spec.Module, ExecutionMode: "opa", Entrypoint: spec.Entrypoint})
	}
	labels, err := guests.Build("wapc-labels")
	if err != nil {
		b.Fatal(err)
	}
	srcs = append(srcs, cache.Source{Wasm: labels, ExecutionMode: string(engine.ModeWaPC)})
	return cache.Cache{Root: b.TempDir(), Version: "bench"}, srcs
}

func loadAll(b *testing.B, e *engine.Engine, wasms []cache.Source) {
	ctx := context.Background()
	for _, s := range wasms {
		settings := []byte(`{}`)
		if s.ExecutionMode == string(engine.ModeWaPC) {
			settings = []byte(`{"required":["team"]}`)
		}
		p, err := e.Load(ctx, engine.Spec{Name: "p", Module: s.Wasm, ExecutionMode: engine.ExecutionMode(s.ExecutionMode), Entrypoint: s.Entrypoint, Settings: settings})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
	}
}

// BenchmarkColdStart_50Policies compares what a starting replica does with 50 policies: verify
// and copy the signed entries, then load from its private cache; or compile every module.
func BenchmarkColdStart_50Policies(b *testing.B) {
	ctx := context.Background()
	c, srcs := coldStartPolicies(b, 50)
	signer, verifier := keys(&testing.T{})
	keys := make([]string, len(srcs))
	for i, s := range srcs {
		k, err := c.Build(ctx, s, signer, b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = k
	}
	b.Run("FromSignedCache", func(b *testing.B) {
		for b.Loop() {
			private := b.TempDir()
			opened := make([]cache.Source, len(keys))
			for i, k := range keys {
				o, err := c.Open(k, verifier, private)
				if err != nil {
					b.Fatal(err)
				}
				opened[i] = cache.Source{Wasm: o.Wasm, ExecutionMode: o.Manifest.ExecutionMode, Entrypoint: o.Manifest.Entrypoint}
			}
			e, err := engine.New(ctx, engine.Options{CacheDir: private})
			if err != nil {
				b.Fatal(err)
			}
			loadAll(b, e, opened)
			_ = e.Close(ctx)
		}
	})
	b.Run("CompileEverything", func(b *testing.B) {
		for b.Loop() {
			e, err := engine.New(ctx, engine.Options{CacheDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			loadAll(b, e, srcs)
			_ = e.Close(ctx)
		}
	})
}
