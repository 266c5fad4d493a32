package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// waPC (https://wapc.io), Kubewarden's native policy ABI: the host calls the guest's
// __guest_call(operation_len, payload_len); the guest pulls operation and payload with
// __guest_request and answers through __guest_response or __guest_error. Guests may call the
// host (__host_call) for capabilities such as Kubernetes lookups; the engine's Host serves them
// and its answer or error reaches the guest through __host_response or __host_error.

const wapcHostModule = "wapc"

// wapcCall is the state of one __guest_call, found by host functions through the context.
type wapcCall struct {
	operation string
	payload   []byte
	response  []byte
	guestErr  string
	host      hostFunc
	logs      *guestLogs
	hostResp  []byte
	hostErr   string
	// interruptedIn names the capability the guest was waiting for when the deadline struck.
	interruptedIn string
}

// hostFunc serves one __host_call for the policy an instance belongs to.
type hostFunc func(ctx context.Context, binding, namespace, operation string, payload []byte) ([]byte, error)

type wapcCallKey struct{}

func currentWaPCCall(ctx context.Context) *wapcCall {
	c, _ := ctx.Value(wapcCallKey{}).(*wapcCall)
	if c == nil {
		panic(errors.New("waPC host function called outside __guest_call"))
	}
	return c
}

// hostCallNameLimit bounds a host call's binding, namespace and operation: names, not data.
const hostCallNameLimit = 1 << 10

// guestErrorLimit is how much of a guest's error message is kept: a message, not a dump.
const guestErrorLimit = 4 << 10

// instantiateWaPCHost serves waPC's host functions. Every buffer read out of a guest is bounded
// (see output_limit.go): an answer or host-call payload over limit traps the guest; an error
// message or log line is cut to its head, and log lines pass the policy's rate limit first.
func instantiateWaPCHost(ctx context.Context, r wazero.Runtime, log logr.Logger, limit uint64) error {
	i32 := api.ValueTypeI32
	b := r.NewHostModuleBuilder(wapcHostModule)
	fn := func(name string, f api.GoModuleFunc, params, results []api.ValueType) {
		b.NewFunctionBuilder().WithGoModuleFunction(f, params, results).Export(name)
	}
	fn("__guest_request", func(ctx context.Context, m api.Module, stack []uint64) {
		c := currentWaPCCall(ctx)
		mem := m.Memory()
		if !mem.WriteString(api.DecodeU32(stack[0]), c.operation) || !mem.Write(api.DecodeU32(stack[1]), c.payload) {
			panic(errors.New("__guest_request: buffers out of guest memory"))
		}
	}, []api.ValueType{i32, i32}, nil)
	fn("__guest_response", func(ctx context.Context, m api.Module, stack []uint64) {
		checkOutput("answer", uint64(api.DecodeU32(stack[1])), limit)
		currentWaPCCall(ctx).response = readGuest(m, stack[0], stack[1], "__guest_response")
	}, []api.ValueType{i32, i32}, nil)
	fn("__guest_error", func(ctx context.Context, m api.Module, stack []uint64) {
		currentWaPCCall(ctx).guestErr = string(readGuest(m, stack[0], min(stack[1], guestErrorLimit), "__guest_error"))
	}, []api.ValueType{i32, i32}, nil)
	fn("__host_call", func(ctx context.Context, m api.Module, stack []uint64) {
		c := currentWaPCCall(ctx)
		for i := 1; i < 6; i += 2 {
			checkOutput("host call name", uint64(api.DecodeU32(stack[i])), hostCallNameLimit)
		}
		checkOutput("host call payload", uint64(api.DecodeU32(stack[7])), limit)
		binding := string(readGuest(m, stack[0], stack[1], "__host_call"))
		namespace := string(readGuest(m, stack[2], stack[3], "__host_call"))
		operation := string(readGuest(m, stack[4], stack[5], "__host_call"))
		payload := readGuest(m, stack[6], stack[7], "__host_call")
		resp, err := c.host(ctx, binding, namespace, operation, payload)
		if err != nil {
			c.hostResp, c.hostErr = nil, err.Error()
			// The first call the deadline cut short is the slow one; a caller that went away is not
			// a timeout.
			if c.interruptedIn == "" && errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				c.interruptedIn = binding + "/" + namespace + "/" + operation
			}
			stack[0] = 0
			return
		}
		c.hostResp, c.hostErr = resp, ""
		stack[0] = 1
	}, []api.ValueType{i32, i32, i32, i32, i32, i32, i32, i32}, []api.ValueType{i32})
	fn("__host_response_len", func(ctx context.Context, m api.Module, stack []uint64) {
		stack[0] = uint64(len(currentWaPCCall(ctx).hostResp))
	}, nil, []api.ValueType{i32})
	fn("__host_response", func(ctx context.Context, m api.Module, stack []uint64) {
		if !m.Memory().Write(api.DecodeU32(stack[0]), currentWaPCCall(ctx).hostResp) {
			panic(errors.New("__host_response: buffer out of guest memory"))
		}
	}, []api.ValueType{i32}, nil)
	fn("__host_error_len", func(ctx context.Context, m api.Module, stack []uint64) {
		stack[0] = uint64(len(currentWaPCCall(ctx).hostErr))
	}, nil, []api.ValueType{i32})
	fn("__host_error", func(ctx context.Context, m api.Module, stack []uint64) {
		if !m.Memory().WriteString(api.DecodeU32(stack[0]), currentWaPCCall(ctx).hostErr) {
			panic(errors.New("__host_error: buffer out of guest memory"))
		}
	}, []api.ValueType{i32}, nil)
	fn("__console_log", func(ctx context.Context, m api.Module, stack []uint64) {
		if c := currentWaPCCall(ctx); c.logs != nil && !c.logs.allow() {
			return
		}
		log.Info("guest console", "message", string(readGuest(m, stack[0], min(stack[1], guestLogLineLimit), "__console_log")))
	}, []api.ValueType{i32, i32}, nil)
	_, err := b.Instantiate(ctx)
	return err
}

// readGuest copies a guest buffer out of its memory: the slice wazero returns aliases memory the
// guest will reuse.
func readGuest(m api.Module, ptr, size uint64, fn string) []byte {
	b, ok := m.Memory().Read(api.DecodeU32(ptr), api.DecodeU32(size))
	if !ok {
		panic(fmt.Errorf("%s: buffer out of guest memory", fn))
	}
	return append([]byte(nil), b...)
}

// checkWaPCModule rejects modules that can't be waPC guests before any instance is made, so
// the load error names the problem instead of a trap.
func checkWaPCModule(m wazero.CompiledModule) error {
	if _, ok := m.ExportedFunctions()["__guest_call"]; !ok {
		return errors.New("not a waPC module: it does not export __guest_call")
	}
	return checkImports(m, wapcHostModule, "wasi_snapshot_preview1")
}

func checkImports(m wazero.CompiledModule, allowed ...string) error {
	for _, f := range m.ImportedFunctions() {
		module, name, _ := f.Import()
		// The loop checks' import (instrumentLoops) is the engine's own, in every mode.
		ok := module == loopCheckModule && name == loopCheckFunc
		for _, a := range allowed {
			ok = ok || module == a
		}
		if !ok {
			return fmt.Errorf("module imports %s.%s, which this execution mode does not provide (it provides %v)", module, name, allowed)
		}
	}
	return nil
}

type wapcInstance struct {
	module    api.Module
	guestCall api.Function
	stderr    *stderrHead
	host      hostFunc
	logs      *guestLogs
	broken    bool
}

func (e *Engine) newWaPCInstance(ctx context.Context, compiled *compiledModule, host hostFunc, logs *guestLogs) (*wapcInstance, error) {
	stderr := &stderrHead{}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStderr(stderr).
		WithSysWalltime().WithSysNanotime()
	// A Go reactor initialises its runtime in _initialize; a TinyGo or Rust guest may be a
	// command whose _start returns. wapc_init is waPC's own optional hook.
	m, err := compiled.instantiate(ctx, cfg, "_initialize", "wapc_init")
	if err != nil {
		return nil, fmt.Errorf("instantiate waPC guest: %w", guestError(ctx, err, stderr))
	}
	return &wapcInstance{module: m, guestCall: m.ExportedFunction("__guest_call"), stderr: stderr, host: host, logs: logs}, nil
}

func (i *wapcInstance) call(ctx context.Context, operation string, payload []byte) ([]byte, error) {
	c := &wapcCall{operation: operation, payload: payload, host: i.host, logs: i.logs}
	i.stderr.reset()
	res, err := callUnlessDone(context.WithValue(ctx, wapcCallKey{}, c), i.guestCall, uint64(len(operation)), uint64(len(payload)))
	if err != nil {
		i.broken = true
		err = guestError(ctx, err, i.stderr)
		if errors.Is(err, ErrTimeout) && c.interruptedIn != "" {
			return nil, &hostWaitError{capability: c.interruptedIn}
		}
		return nil, err
	}
	if c.interruptedIn != "" {
		// The guest answered after its deadline, on the strength of a lookup the deadline cut
		// short: the timeout is the true outcome, whatever the guest made of the error it got.
		i.broken = true
		return nil, &hostWaitError{capability: c.interruptedIn}
	}
	if uint32(res[0]) != 1 {
		return nil, fmt.Errorf("guest returned an error for %s: %s", operation, c.guestErr)
	}
	return c.response, nil
}

func (i *wapcInstance) validate(ctx context.Context, payload []byte) ([]byte, error) {
	return i.call(ctx, "validate", payload)
}

func (i *wapcInstance) validateSettings(ctx context.Context, settings []byte) ([]byte, error) {
	return i.call(ctx, "validate_settings", settings)
}

func (i *wapcInstance) reusable() bool { return !i.broken && !i.module.IsClosed() }

func (i *wapcInstance) close() { _ = i.module.Close(context.Background()) }
