package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// DefaultMemoryLimitBytes caps the linear memory of one instance when Options names no limit.
// A Go guest needs a few MiB to start; 256 MiB leaves room for large objects without letting one
// policy starve the node.
const DefaultMemoryLimitBytes = 256 << 20

const wasmPageSize = 64 << 10

// Options configure an Engine.
type Options struct {
	// CacheDir keeps wazero's compiled machine code on disk so a restart (or another replica
	// sharing the directory) skips compilation. Empty keeps it in memory only.
	CacheDir string
	// MemoryLimitBytes caps each instance's linear memory; zero means DefaultMemoryLimitBytes.
	MemoryLimitBytes uint64
	// MaxInstancesPerPolicy bounds each policy's pool; zero means GOMAXPROCS, since more
	// instances than cores only add memory.
	MaxInstancesPerPolicy int
	// Logger receives guest console output and lifecycle messages.
	Logger logr.Logger
	// Host serves waPC guests' host calls (Kubewarden's host capabilities); nil answers every
	// call with an error that says the server has none.
	Host Host
	// OutputLimitBytes bounds what one evaluation's guest can make the host hold outside its
	// memory (WASI stdout, a waPC answer or host-call payload, an OPA result); a guest that
	// writes more is trapped with ErrOutputLimit. Zero means DefaultOutputLimitBytes.
	OutputLimitBytes uint64
	// GuestLogLinesPerSecond and GuestLogBurst shape the token bucket that rate-limits each
	// policy's guest logging; zero means the defaults. OnGuestLogDropped, if set, is called for
	// every line the bucket drops (a metric counts them).
	GuestLogLinesPerSecond float64
	GuestLogBurst          int
	OnGuestLogDropped      func(policy string)
	// CloseOnContextDone stops every call the way wazero does by itself, looking at the
	// module's state at each loop iteration from Go, instead of through the loop checks the
	// engine adds to the modules it can rewrite (see instrumentLoops): slower by several times
	// for loop-heavy guests, the same guarantee. For comparisons and as an escape hatch.
	CloseOnContextDone bool
}

// Engine compiles and runs policy modules. It is safe for concurrent use.
type Engine struct {
	opts  Options
	cache wazero.CompilationCache
	// config closes modules on context done (modules without loop checks); fastConfig leaves
	// that to the loop checks (see prepare).
	config, fastConfig wazero.RuntimeConfig
	// shared runs every waPC and WASI instance of a module with loop checks, guarded those of
	// the others: their host functions find the call they serve through the context, so one
	// runtime, and one compilation per module, serves all policies. OPA modules import their
	// memory from a module that must be called "env", a name a runtime can hold once, so each
	// OPA instance gets its own runtime over the same compilation cache.
	shared, guarded wazero.Runtime

	mu       sync.Mutex
	compiled map[string]*compiledModule
}

type compiledModule struct {
	module wazero.CompiledModule
	// runtime compiled module, and instantiates it; interruptible says it has loop checks.
	runtime       wazero.Runtime
	interruptible bool
	refs          int
}

// New starts an engine. Close releases it.
func New(ctx context.Context, opts Options) (*Engine, error) {
	if opts.MemoryLimitBytes == 0 {
		opts.MemoryLimitBytes = DefaultMemoryLimitBytes
	}
	if opts.MaxInstancesPerPolicy <= 0 {
		opts.MaxInstancesPerPolicy = runtime.GOMAXPROCS(0)
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.OutputLimitBytes == 0 {
		opts.OutputLimitBytes = DefaultOutputLimitBytes
	}
	if opts.GuestLogLinesPerSecond <= 0 {
		opts.GuestLogLinesPerSecond = DefaultGuestLogLinesPerSecond
	}
	if opts.GuestLogBurst <= 0 {
		opts.GuestLogBurst = DefaultGuestLogBurst
	}
	cache := wazero.NewCompilationCache()
	if opts.CacheDir != "" {
		var err error
		if cache, err = wazero.NewCompilationCacheWithDir(opts.CacheDir); err != nil {
			return nil, fmt.Errorf("open compilation cache %s: %w", opts.CacheDir, err)
		}
	}
	pages := uint32(opts.MemoryLimitBytes / wasmPageSize)
	if pages == 0 || pages > 65536 {
		return nil, fmt.Errorf("memory limit %d bytes is outside 64KiB..4GiB", opts.MemoryLimitBytes)
	}
	fast := wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithMemoryLimitPages(pages)
	e := &Engine{opts: opts, cache: cache, config: fast.WithCloseOnContextDone(true), fastConfig: fast, compiled: map[string]*compiledModule{}}
	e.shared = wazero.NewRuntimeWithConfig(ctx, e.fastConfig)
	e.guarded = wazero.NewRuntimeWithConfig(ctx, e.config)
	for _, r := range []wazero.Runtime{e.shared, e.guarded} {
		if err := instantiateLoopCheck(ctx, r); err != nil {
			e.Close(ctx)
			return nil, fmt.Errorf("instantiate loop checks: %w", err)
		}
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, r); err != nil {
			e.Close(ctx)
			return nil, fmt.Errorf("instantiate WASI host module: %w", err)
		}
		if err := instantiateWaPCHost(ctx, r, opts.Logger, opts.OutputLimitBytes); err != nil {
			e.Close(ctx)
			return nil, fmt.Errorf("instantiate waPC host module: %w", err)
		}
	}
	return e, nil
}

// Close releases every compiled module and the compilation cache's memory. Policies loaded
// from the engine must be closed first.
func (e *Engine) Close(ctx context.Context) error {
	err := errors.Join(e.shared.Close(ctx), e.guarded.Close(ctx))
	return errors.Join(err, e.cache.Close(ctx))
}

// Digest is the identity of a module: the hex SHA-256 of its bytes.
func Digest(module []byte) string {
	sum := sha256.Sum256(module)
	return hex.EncodeToString(sum[:])
}

// compileShared compiles a module in the shared runtime once per digest; the returned release
// must be called when the policy using it is unloaded.
func (e *Engine) compileShared(ctx context.Context, module []byte) (*compiledModule, func(), error) {
	digest := Digest(module)
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.compiled[digest]
	if !ok {
		start := time.Now()
		p := e.prepare(module)
		r := e.guarded
		if p.interruptible {
			r = e.shared
		}
		m, err := r.CompileModule(ctx, p.module)
		if err != nil {
			return nil, nil, fmt.Errorf("compile module sha256:%s: %w", digest[:12], err)
		}
		e.opts.Logger.V(1).Info("compiled module", "digest", digest, "duration", time.Since(start), "loopChecks", p.interruptible)
		c = &compiledModule{module: m, runtime: r, interruptible: p.interruptible}
		e.compiled[digest] = c
	}
	c.refs++
	var once sync.Once
	release := func() {
		once.Do(func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			c.refs--
			if c.refs == 0 {
				delete(e.compiled, digest)
				_ = c.module.Close(context.Background())
			}
		})
	}
	return c, release, nil
}

// Precompile compiles a module into the compilation cache without loading a policy, so that a
// later Load is a cache hit. It reports how long compilation took.
func (e *Engine) Precompile(ctx context.Context, module []byte) (time.Duration, error) {
	start := time.Now()
	p := e.prepare(module)
	r := wazero.NewRuntimeWithConfig(ctx, p.config)
	defer r.Close(ctx)
	m, err := r.CompileModule(ctx, p.module)
	if err != nil {
		return 0, fmt.Errorf("compile module sha256:%s: %w", Digest(module)[:12], err)
	}
	_ = m.Close(ctx)
	return time.Since(start), nil
}
