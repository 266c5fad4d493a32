package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/lifecycle/cache"
	"regent.dev/regent/policyserver/lifecycle/pull"
	"regent.dev/regent/policyserver/signatures"
)

// stepError is a failure with the condition reason it is reported under.
type stepError struct {
	reason string
	err    error
}

func (e *stepError) Error() string { return e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// prepare pulls the revision's module and turns it into the wasm the engine loads (Rego
// sources and Gatekeeper templates are compiled here), exactly as the server itself would. A
// non-nil memo remembers compilations by what was pulled: most new generations change only
// settings, and compiling the same Rego again is the costliest step of initializing them.
func prepare(ctx context.Context, r revision, opts pull.Options, scratch string, memo *compiledSources) (cache.Source, error) {
	m, err := pull.Fetch(ctx, r.spec.Module, opts)
	if err != nil {
		return cache.Source{}, pullError(err)
	}
	return compileSource(ctx, r, m, scratch, memo)
}

// pullError reports a failed pull under its reason: an untrusted module is told apart from a
// registry or server that failed.
func pullError(err error) *stepError {
	if errors.Is(err, signatures.ErrUntrusted) || errors.Is(err, pull.ErrUnsignedSource) {
		return &stepError{ReasonUntrustedModule, err}
	}
	return &stepError{ReasonPullError, err}
}

// compileSource turns a pulled module into the wasm the engine loads.
func compileSource(ctx context.Context, r revision, m pull.Module, scratch string, memo *compiledSources) (cache.Source, error) {
	memoKey := m.Digest + " " + path.Base(m.Path) + " " + string(r.spec.ExecutionMode)
	if src, ok := memo.get(memoKey); ok {
		return src, nil
	}
	dir, err := os.MkdirTemp(scratch, pullDirPrefix)
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
	src := cache.Source{ModuleDigest: m.Digest, Wasm: spec.Module, ExecutionMode: string(spec.ExecutionMode), Entrypoint: spec.Entrypoint}
	memo.put(memoKey, src)
	return src, nil
}

// pullDirPrefix names the scratch directories prepare makes (and removes unless killed).
const pullDirPrefix = "pull-"

// compiledSources remembers the last few prepared sources. Small on purpose: it only has to span
// the generations of policies being edited now.
type compiledSources struct {
	keys  []string
	byKey map[string]cache.Source
}

const compiledSourcesKept = 16

func (c *compiledSources) get(key string) (cache.Source, bool) {
	if c == nil {
		return cache.Source{}, false
	}
	src, ok := c.byKey[key]
	return src, ok
}

func (c *compiledSources) put(key string, src cache.Source) {
	if c == nil {
		return
	}
	if c.byKey == nil {
		c.byKey = map[string]cache.Source{}
	}
	if _, ok := c.byKey[key]; ok {
		return
	}
	if len(c.keys) == compiledSourcesKept {
		delete(c.byKey, c.keys[0])
		c.keys = c.keys[1:]
	}
	c.keys = append(c.keys, key)
	c.byKey[key] = src
}
