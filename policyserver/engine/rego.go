package engine

import (
	"bytes"
	"context"
	"fmt"
	"testing/fstest"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/compile"
)

// CompileRego compiles Rego modules (file name → source) to an OPA wasm module with OPA's own
// Go compiler, in process: no external toolchain. entrypoint is a rule path such as
// "policy/main". v0 selects the pre-1.0 Rego syntax (Gatekeeper's library is written in it).
// Only built-ins a policy may be served compile (see opa_capabilities.go); the error of any
// other names it.
func CompileRego(ctx context.Context, files map[string]string, entrypoint string, v0 bool) ([]byte, error) {
	fsys := fstest.MapFS{}
	for name, src := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	version := ast.RegoV1
	if v0 {
		version = ast.RegoV0
	}
	c := compile.New().
		WithTarget(compile.TargetWasm).
		WithEntrypoints(entrypoint).
		WithRegoVersion(version).
		WithCapabilities(regoCapabilities()).
		WithFS(fsys).
		WithPaths(".").
		WithOutput(&bytes.Buffer{})
	if err := c.Build(ctx); err != nil {
		return nil, fmt.Errorf("compile Rego to wasm (entrypoint %s): %w", entrypoint, err)
	}
	b := c.Bundle()
	if b == nil || len(b.WasmModules) == 0 {
		return nil, fmt.Errorf("compile Rego to wasm (entrypoint %s): no wasm module produced", entrypoint)
	}
	return b.WasmModules[0].Raw, nil
}
