package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// prepared is a module as the engine compiles it: with loop checks (instrumentLoops) when it
// could add them, run in a runtime that leaves stopping calls to them; otherwise as given, run in
// a runtime that closes modules on context done.
type prepared struct {
	module []byte
	// interruptible: module has the loop checks; config has no close-on-context-done.
	interruptible bool
	config        wazero.RuntimeConfig
}

// prepare instruments module when it can. The choice depends on the bytes only, so a module is
// compiled the same way wherever it is (Precompile on a leader, Load on a replica) and the
// compilation cache is shared.
func (e *Engine) prepare(module []byte) prepared {
	if !e.opts.CloseOnContextDone {
		if m, err := instrumentLoops(module); err == nil {
			return prepared{module: m, interruptible: true, config: e.fastConfig}
		}
	}
	return prepared{module: module, config: e.config}
}

// instantiateLoopCheck defines the function the loop checks call, in r: it ends the call with
// the exit wazero gives a module it closes on context done when the call's context has ended,
// so guestError reads both alike, and otherwise refills the fuel.
func instantiateLoopCheck(ctx context.Context, r wazero.Runtime) error {
	_, err := r.NewHostModuleBuilder(loopCheckModule).NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(ctx context.Context, stack []uint64) {
			select {
			case <-ctx.Done():
				panic(contextExit(ctx))
			default:
			}
			stack[0] = loopFuel
		}), nil, []api.ValueType{api.ValueTypeI32}).
		Export(loopCheckFunc).
		Instantiate(ctx)
	return err
}

// callUnlessDone calls f unless ctx has already ended, as wazero does for a module it closes on
// context done: the loop checks look at the context only once loopFuel is spent.
func callUnlessDone(ctx context.Context, f api.Function, params ...uint64) ([]uint64, error) {
	if ctx.Err() != nil {
		return nil, contextExit(ctx)
	}
	return f.Call(ctx, params...)
}

// contextExit is the exit wazero reports when it closes a module because ctx ended.
func contextExit(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return sys.NewExitError(sys.ExitCodeDeadlineExceeded)
	}
	return sys.NewExitError(sys.ExitCodeContextCanceled)
}

// instantiate makes an instance of c and runs the start functions of names it exports, as
// wazero's start functions do, errors included (an exit is returned as is, code 0 as success,
// with the closed module). A module with loop checks had its start section made an export,
// which runs first, as the start section would have.
func (c *compiledModule) instantiate(ctx context.Context, cfg wazero.ModuleConfig, start ...string) (m api.Module, err error) {
	if !c.interruptible {
		return c.runtime.InstantiateModule(ctx, c.module, cfg.WithStartFunctions(start...))
	}
	if m, err = c.runtime.InstantiateModule(ctx, c.module, cfg.WithStartFunctions()); err != nil {
		return m, err
	}
	for _, name := range append([]string{startExport}, start...) {
		f := m.ExportedFunction(name)
		if f == nil {
			continue
		}
		if _, err = callUnlessDone(ctx, f); err != nil {
			_ = m.Close(ctx)
			if se, ok := err.(*sys.ExitError); ok {
				if se.ExitCode() == 0 {
					err = nil
				}
				return m, err
			}
			return m, fmt.Errorf("module[%s] function[%s] failed: %w", m.Name(), name, err)
		}
	}
	return m, nil
}
