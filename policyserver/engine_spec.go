package policyserver

import (
	"context"

	"regent.dev/regent/policyserver/engine"
)

// EngineSpec is what the engine would load for p: the module read and, for Rego sources and
// Gatekeeper templates, compiled to wasm. The policy lifecycle uses it to precompile a module
// into the shared cache exactly as the server will load it.
func (p PolicyConfig) EngineSpec(ctx context.Context, name string) (engine.Spec, error) {
	return p.spec(ctx, name)
}
