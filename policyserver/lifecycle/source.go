package lifecycle

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/lifecycle/cache"
	"regent.dev/regent/policyserver/lifecycle/pull"
)

// stepError is a failure with the condition reason it is reported under.
type stepError struct {
	reason string
	err    error
}

func (e *stepError) Error() string { return e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// prepare pulls the revision's module and turns it into the wasm the engine loads (Rego
// sources and Gatekeeper templates are compiled here), exactly as the server itself would.
func prepare(ctx context.Context, r revision, opts pull.Options, scratch string) (cache.Source, error) {
	m, err := pull.Fetch(ctx, r.spec.Module, opts)
	if err != nil {
		return cache.Source{}, &stepError{ReasonPullError, err}
	}
	dir, err := os.MkdirTemp(scratch, "pull-")
	if err != nil {
		return cache.Source{}, &stepError{ReasonPullError, err}
	}
	defer os.RemoveAll(dir)
	// The file's extension is what tells the server a .rego or a template from a module.
	base := path.Base(m.Path)
	if i := strings.LastIndexAny(base, ":@"); i > 0 && !strings.Contains(base[i:], ".") {
		base = base[:i] // registry tags and digests are not extensions
	}
	file := filepath.Join(dir, base)
	if err := os.WriteFile(file, m.Bytes, 0o600); err != nil {
		return cache.Source{}, &stepError{ReasonPullError, err}
	}
	mode := string(r.spec.ExecutionMode)
	spec, err := policyserver.PolicyConfig{Module: file, ExecutionMode: mode}.EngineSpec(ctx, r.key.Name)
	if err != nil {
		return cache.Source{}, &stepError{ReasonCompileError, fmt.Errorf("module %s: %w", r.spec.Module, err)}
	}
	return cache.Source{ModuleDigest: m.Digest, Wasm: spec.Module, ExecutionMode: string(spec.ExecutionMode), Entrypoint: spec.Entrypoint}, nil
}
