package opa

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

// Engine holds the loaded Rego modules, their compiled form and the replicated data, and answers
// queries. It is safe for concurrent use: queries share prepared queries and never wait for a
// reload, which swaps the compiler and the prepared-query cache at once.
type Engine struct {
	store storage.Store

	mu sync.Mutex
	// sources are the module sets that compiled, by source (a ConfigMap's namespace/name), each
	// module id → text.
	sources map[string]map[string]string

	state sync.Mutex // guards compiler and prepared together
	// compiler is the last set that compiled; queries read it with prepared.
	compiler *ast.Compiler
	prepared *sync.Map // query path → *rego.PreparedEvalQuery for compiler

	// onSwap are called after each change of the loaded modules (the remediator re-evaluates).
	onSwap []func()
}

// NewEngine returns an engine with no modules and an empty store.
func NewEngine() *Engine {
	c := ast.NewCompiler()
	c.Compile(map[string]*ast.Module{})
	return &Engine{
		store:    inmem.New(),
		sources:  map[string]map[string]string{},
		compiler: c,
		prepared: &sync.Map{},
	}
}

// Store is the engine's data store (the inventory writes there).
func (e *Engine) Store() storage.Store { return e.store }

// SetSource replaces the modules of one source (id → Rego text) and recompiles everything. On a
// parse or compile error nothing changes (the source's previous modules stay loaded) and the error
// is an ast.Errors carrying each failure's file and row.
func (e *Engine) SetSource(source string, modules map[string]string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	next := make(map[string]map[string]string, len(e.sources)+1)
	for k, v := range e.sources {
		next[k] = v
	}
	if len(modules) == 0 {
		delete(next, source)
	} else {
		next[source] = modules
	}
	c, err := compileSources(next)
	if err != nil {
		return err
	}
	e.sources = next
	e.swap(c)
	return nil
}

// RemoveSource unloads a source's modules. When what remains does not compile without them
// (another module calls a function they define) nothing changes and the error says why.
func (e *Engine) RemoveSource(source string) error { return e.SetSource(source, nil) }

// Modules returns every loaded module id, sorted.
func (e *Engine) Modules() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ids []string
	for _, mods := range e.sources {
		for id := range mods {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

func (e *Engine) swap(c *ast.Compiler) {
	e.state.Lock()
	e.compiler = c
	e.prepared = &sync.Map{}
	hooks := e.onSwap
	e.state.Unlock()
	for _, f := range hooks {
		f()
	}
}

func compileSources(sources map[string]map[string]string) (*ast.Compiler, error) {
	parsed := map[string]*ast.Module{}
	var errs ast.Errors
	for _, mods := range sources {
		for id, text := range mods {
			m, err := ast.ParseModuleWithOpts(id, text, ast.ParserOptions{RegoVersion: ast.RegoV1})
			if err != nil {
				var aerrs ast.Errors
				if errors.As(err, &aerrs) {
					errs = append(errs, aerrs...)
					continue
				}
				return nil, fmt.Errorf("parse %s: %w", id, err)
			}
			parsed[id] = m
		}
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	c := ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1)
	if c.Compile(parsed); c.Failed() {
		c.Errors.Sort()
		return nil, c.Errors
	}
	return c, nil
}

// Query evaluates the document at path (the segments after /v1/data/, empty for all of data) with
// input (nil for none). defined is false when the document is undefined.
func (e *Engine) Query(ctx context.Context, path []string, input any) (result any, defined bool, err error) {
	e.state.Lock()
	c, cache := e.compiler, e.prepared
	e.state.Unlock()

	key := strings.Join(path, "\x00") // segments may contain "/"
	var pq *rego.PreparedEvalQuery
	if v, ok := cache.Load(key); ok {
		pq = v.(*rego.PreparedEvalQuery)
	} else {
		ref := DataRef(path)
		q, err := rego.New(
			rego.ParsedQuery(ast.NewBody(ast.NewExpr(ast.NewTerm(ref)))),
			rego.Compiler(c),
			rego.Store(e.store),
		).PrepareForEval(ctx)
		if err != nil {
			return nil, false, err
		}
		pq = &q
		cache.Store(key, pq)
	}
	var opts []rego.EvalOption
	if input != nil {
		opts = append(opts, rego.EvalInput(input))
	}
	rs, err := pq.Eval(ctx, opts...)
	if err != nil {
		return nil, false, err
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, false, nil
	}
	return rs[0].Expressions[0].Value, true, nil
}

// DataRef is the reference OPA's server builds from a /v1/data path: data followed by each segment,
// as a number when it parses as one (an array index), otherwise as a string.
func DataRef(path []string) ast.Ref {
	ref := ast.Ref{ast.DefaultRootDocument}
	for _, p := range path {
		if i, err := strconv.Atoi(p); err == nil {
			ref = append(ref, ast.IntNumberTerm(i))
			continue
		}
		ref = append(ref, ast.StringTerm(p))
	}
	return ref
}
