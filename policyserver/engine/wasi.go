package engine

import (
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"
)

// WASI mode: the policy is a command. Each answer costs one run of the program, and for a Go
// guest most of that run is its runtime starting (milliseconds). So an instance is started
// ahead of the request with argv "validate": it boots and then blocks reading stdin; the
// request only writes the payload and waits for stdout. The pool replaces it in the background
// once it has answered. Settings validation, rare, runs a fresh command in the foreground.

func checkWASIModule(m wazero.CompiledModule) error {
	if _, ok := m.ExportedFunctions()["_start"]; !ok {
		return errors.New("not a WASI command: it does not export _start")
	}
	return checkImports(m, "wasi_snapshot_preview1")
}

func (e *Engine) wasiConfig(stdin io.Reader, stdout, stderr io.Writer, args ...string) wazero.ModuleConfig {
	return wazero.NewModuleConfig().
		WithName("").
		WithArgs(append([]string{"policy"}, args...)...).
		WithStdin(stdin).WithStdout(stdout).WithStderr(stderr).
		WithSysWalltime().WithSysNanotime().WithSysNanosleep()
}

// runWASI runs the command to completion and returns its stdout.
func (e *Engine) runWASI(ctx context.Context, compiled *compiledModule, stdin []byte, args ...string) ([]byte, error) {
	stdout := e.stdoutBuffer()
	stderr := &stderrHead{}
	m, err := compiled.instantiate(ctx, e.wasiConfig(bytes.NewReader(stdin), stdout, stderr, args...), "_start")
	if m != nil {
		_ = m.Close(context.Background())
	}
	if err := wasiExit(ctx, err, stderr); err != nil {
		return nil, err
	}
	return stdout.Bytes(), nil
}

// stdoutBuffer holds a command's stdout, its answer, up to the output limit.
func (e *Engine) stdoutBuffer() *boundedBuffer {
	return &boundedBuffer{limit: e.opts.OutputLimitBytes, what: "stdout"}
}

// wasiExit accepts a normal exit (code 0) and explains anything else.
func wasiExit(ctx context.Context, err error, stderr *stderrHead) error {
	var exit *sys.ExitError
	if err == nil || (errors.As(err, &exit) && exit.ExitCode() == 0) {
		return nil
	}
	return guestError(ctx, err, stderr)
}

// wasiInstance is a command started ahead of its request, waiting for its stdin.
type wasiInstance struct {
	engine   *Engine
	compiled *compiledModule
	stdin    *io.PipeWriter
	stdout   *boundedBuffer
	stderr   stderrHead
	cancel   context.CancelFunc
	done     chan error
	finished chan struct{}
	used     bool
}

func (e *Engine) startWASIInstance(compiled *compiledModule) *wasiInstance {
	i := &wasiInstance{engine: e, compiled: compiled, stdout: e.stdoutBuffer(), done: make(chan error, 1), finished: make(chan struct{})}
	stdin, stdinWriter := io.Pipe()
	i.stdin = stdinWriter
	// The run outlives the call that started it, so it has a context of its own; a request's
	// deadline reaches it through cancel.
	ctx, cancel := context.WithCancel(context.Background())
	i.cancel = cancel
	go func() {
		m, err := compiled.instantiate(ctx, e.wasiConfig(stdin, i.stdout, &i.stderr, "validate"), "_start")
		if m != nil {
			_ = m.Close(context.Background())
		}
		_ = stdin.Close()
		i.done <- err
		close(i.finished)
	}()
	return i
}

func (i *wasiInstance) validate(ctx context.Context, payload []byte) ([]byte, error) {
	if ctx.Err() != nil {
		// As callUnlessDone: a request that ended is not evaluated. Once the payload is written,
		// a quick command may exit before the select below looks, and the select then picks
		// between its answer and the end at random; the instance, still unused, stays pooled.
		return nil, evaluationEnded(ctx)
	}
	i.used = true
	written := make(chan struct{})
	go func() {
		// A guest that exits without reading its stdin closes the pipe, which ends this write.
		_, _ = i.stdin.Write(payload)
		_ = i.stdin.Close()
		close(written)
	}()
	select {
	case err := <-i.done:
		<-written
		if err := wasiExit(ctx, err, &i.stderr); err != nil {
			return nil, err
		}
		return i.stdout.Bytes(), nil
	case <-ctx.Done():
		i.cancel()
		<-i.done
		<-written
		return nil, evaluationEnded(ctx)
	}
}

func (i *wasiInstance) validateSettings(ctx context.Context, settings []byte) ([]byte, error) {
	return i.engine.runWASI(ctx, i.compiled, settings, "validate-settings")
}

// reusable is false once the command has answered: a command runs once.
func (i *wasiInstance) reusable() bool { return !i.used }

// close stops the command and waits for it, so the engine is never closed under a running one.
func (i *wasiInstance) close() {
	i.cancel()
	_ = i.stdin.CloseWithError(errors.New("policy unloaded"))
	<-i.finished
}
