package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// benchPolicies loads one policy per runtime, each evaluating the same two-container pod.
func benchPolicies(b *testing.B, e *Engine) map[string]*Policy {
	tmpl, err := os.ReadFile(filepath.Join("..", "testdata", "gatekeeper", "allowedrepos", "template.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	ct, err := ParseConstraintTemplate(tmpl)
	if err != nil {
		b.Fatal(err)
	}
	gk, err := CompileRego(context.Background(), ct.Files, ct.Entrypoint, true)
	if err != nil {
		b.Fatal(err)
	}
	return map[string]*Policy{
		"wapc":          load(b, e, Spec{Module: guest(b, "wapc-labels"), Settings: json.RawMessage(`{"required":["team"]}`)}),
		"wapc-fastjson": load(b, e, Spec{Module: guest(b, "wapc-labels-fastjson"), Settings: json.RawMessage(`{"required":["team"]}`)}),
		"wasi":          load(b, e, Spec{Module: guest(b, "wasi-privileged"), ExecutionMode: ModeWASI}),
		"opa":           load(b, e, Spec{Module: regoModule(b, "disallow-latest.rego", "policy/main"), ExecutionMode: ModeOPA, Entrypoint: "policy/main"}),
		"gatekeeper": load(b, e, Spec{Module: gk, ExecutionMode: ModeGatekeeper, Entrypoint: ct.Entrypoint,
			Settings: json.RawMessage(`{"repos":["docker.io/"]}`)}),
	}
}

// BenchmarkValidate measures one evaluation on a warm instance per runtime, serially and with
// parallel callers (the pool holds GOMAXPROCS instances).
func BenchmarkValidate(b *testing.B) {
	e := newTestEngine(b, Options{})
	req := podRequest(b, "default", map[string]string{"team": "a"},
		container("web", "docker.io/nginx:1.27", false), container("sidecar", "docker.io/envoy:1.30", false))
	for _, name := range []string{"wapc", "wapc-fastjson", "wasi", "opa", "gatekeeper"} {
		p := benchPolicies(b, e)[name]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if r, err := p.Validate(context.Background(), req); err != nil || !r.Accepted {
					b.Fatal(r, err)
				}
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if r, err := p.Validate(context.Background(), req); err != nil || !r.Accepted {
						b.Error(r, err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkCompile measures compiling a Go guest without a cache and from wazero's file cache.
func BenchmarkCompile(b *testing.B) {
	module := guest(b, "wapc-labels")
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			e := newTestEngine(b, Options{CacheDir: b.TempDir()})
			if _, err := e.Precompile(context.Background(), module); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		dir := b.TempDir()
		warm := newTestEngine(b, Options{CacheDir: dir})
		if _, err := warm.Precompile(context.Background(), module); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			e := newTestEngine(b, Options{CacheDir: dir})
			if _, err := e.Precompile(context.Background(), module); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCompileRego measures OPA's Go compiler turning the test Rego into wasm.
func BenchmarkCompileRego(b *testing.B) {
	for b.Loop() {
		regoModule(b, "disallow-latest.rego", "policy/main")
	}
}

// BenchmarkWaPCCallOverhead measures the host's share of a waPC call: a round trip through
// __guest_call for an operation that does no work (the guest's JSON handling is the rest).
func BenchmarkWaPCCallOverhead(b *testing.B) {
	e := newTestEngine(b, Options{})
	p := load(b, e, Spec{Module: guest(b, "wapc-labels"), Settings: json.RawMessage(`{"required":["team"]}`)})
	inst, err := p.pool.acquire(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer p.pool.release(inst)
	w := inst.(*wapcInstance)
	for b.Loop() {
		if _, err := w.call(context.Background(), "protocol_version", nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoopChecks compares, in one run, an evaluation stopped by the engine's loop checks with
// the same evaluation under wazero's own per-iteration check (Options.CloseOnContextDone).
func BenchmarkLoopChecks(b *testing.B) {
	req := podRequest(b, "default", map[string]string{"team": "a"},
		container("web", "docker.io/nginx:1.27", false), container("sidecar", "docker.io/envoy:1.30", false))
	for _, check := range []struct {
		name        string
		closeOnDone bool
	}{{"loop-checks", false}, {"wazero-check", true}} {
		e := newTestEngine(b, Options{CloseOnContextDone: check.closeOnDone})
		for _, name := range []string{"opa", "wapc-fastjson"} {
			var p *Policy
			if name == "opa" {
				p = load(b, e, Spec{Module: regoModule(b, "disallow-latest.rego", "policy/main"), ExecutionMode: ModeOPA, Entrypoint: "policy/main"})
			} else {
				p = load(b, e, Spec{Module: guest(b, "wapc-labels-fastjson"), Settings: json.RawMessage(`{"required":["team"]}`)})
			}
			b.Run(check.name+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if r, err := p.Validate(context.Background(), req); err != nil || !r.Accepted {
						b.Fatal(r, err)
					}
				}
			})
		}
	}
}
