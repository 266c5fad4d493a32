package policyserver

import (
	"context"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver/engine"
)

// EngineSpec is what the engine would load for p: the module read and, for Rego sources and
// Gatekeeper templates, compiled to wasm. The policy lifecycle uses it to precompile a module
// into the shared cache exactly as the server will load it.
func (p PolicyConfig) EngineSpec(ctx context.Context, name string) (engine.Spec, error) {
	return p.spec(ctx, name)
}

// EngineResources is a policy's contextAwareResources as the engine takes them.
func EngineResources(in []kubewardenv1.ContextAwareResource) []engine.Resource {
	if len(in) == 0 {
		return nil
	}
	out := make([]engine.Resource, len(in))
	for i, r := range in {
		out[i] = engine.Resource{APIVersion: r.APIVersion, Kind: r.Kind}
	}
	return out
}
