package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// OPA's wasm ABI (https://www.openpolicyagent.org/docs/wasm): the policy parses JSON into its
// own heap (opa_malloc, opa_json_parse), evaluates an entrypoint in one call (opa_eval, ABI
// 1.2+) and serialises the result set. Data (here the policy's settings) is parsed once when the
// instance is made; each evaluation writes its input above it and opa_eval resets the heap to
// that point, so an instance is reused without leaking.

var opaRequiredExports = []string{"opa_eval", "opa_malloc", "opa_json_dump", "opa_value_dump",
	"opa_value_parse", "opa_heap_ptr_get", "builtins", "entrypoints"}

func checkOPAModule(m wazero.CompiledModule) error {
	exports := m.ExportedFunctions()
	for _, name := range opaRequiredExports {
		if _, ok := exports[name]; !ok {
			return fmt.Errorf("not an OPA wasm module (ABI 1.2 or later): it does not export %s", name)
		}
	}
	return checkImports(m, "env")
}

type opaInstance struct {
	runtime  wazero.Runtime
	module   api.Module
	mem      api.Memory
	fn       map[string]api.Function
	builtins *opaBuiltins
	// outputLimit bounds the result set copied out of the guest.
	outputLimit uint64
	entrypoint  int32
	dataAddr    uint32
	heapPtr     uint32
	broken      bool
}

// newOPAInstance instantiates the policy in a runtime of its own (see Engine.shared) and parses
// its data. entrypoint "" picks the module's first.
func (e *Engine) newOPAInstance(ctx context.Context, module []byte, entrypoint string, data []byte, allowNetwork bool) (_ *opaInstance, err error) {
	r := wazero.NewRuntimeWithConfig(ctx, e.config)
	defer func() {
		if err != nil {
			_ = r.Close(context.Background())
		}
	}()
	compiled, err := r.CompileModule(ctx, module)
	if err != nil {
		return nil, fmt.Errorf("compile OPA module: %w", err)
	}
	if err := checkOPAModule(compiled); err != nil {
		return nil, err
	}
	minPages := uint32(2)
	for _, m := range compiled.ImportedMemories() {
		minPages = max(minPages, m.Min())
	}
	maxPages := uint32(e.opts.MemoryLimitBytes / wasmPageSize)
	if minPages > maxPages {
		return nil, fmt.Errorf("OPA module needs %d pages of memory, over the limit of %d", minPages, maxPages)
	}

	inst := &opaInstance{runtime: r, fn: map[string]api.Function{}, outputLimit: e.opts.OutputLimitBytes}
	inst.builtins = &opaBuiltins{inst: inst}
	host := r.NewHostModuleBuilder(opaHostModule)
	for _, f := range opaHostFuncs {
		params := make([]api.ValueType, f.params)
		for i := range params {
			params[i] = api.ValueTypeI32
		}
		var results []api.ValueType
		if f.returns {
			results = []api.ValueType{api.ValueTypeI32}
		}
		var impl api.GoModuleFunc
		switch f.name {
		case "opa_abort":
			impl = inst.builtins.abort
		case "opa_println":
			impl = func(context.Context, api.Module, []uint64) {}
		default:
			arity := f.params - 2
			impl = func(ctx context.Context, _ api.Module, stack []uint64) { inst.builtins.call(ctx, stack, arity) }
		}
		host.NewFunctionBuilder().WithGoModuleFunction(impl, params, results).Export(f.name)
	}
	if _, err := host.Instantiate(ctx); err != nil {
		return nil, fmt.Errorf("instantiate OPA host functions: %w", err)
	}
	if _, err := r.InstantiateWithConfig(ctx, opaEnvModule(minPages, maxPages), wazero.NewModuleConfig().WithName("env")); err != nil {
		return nil, fmt.Errorf("instantiate OPA memory module: %w", err)
	}
	m, err := r.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName("policy"))
	if err != nil {
		return nil, fmt.Errorf("instantiate OPA module: %w", err)
	}
	inst.module, inst.mem = m, m.Memory()
	for _, name := range append(opaRequiredExports, "opa_json_parse", "opa_free") {
		inst.fn[name] = m.ExportedFunction(name)
	}
	if err := inst.checkABI(); err != nil {
		return nil, err
	}
	if err := inst.loadBuiltins(ctx, allowNetwork); err != nil {
		return nil, err
	}
	if inst.entrypoint, err = inst.findEntrypoint(ctx, entrypoint); err != nil {
		return nil, err
	}
	if inst.dataAddr, err = inst.parseJSON(ctx, data); err != nil {
		return nil, fmt.Errorf("load data: %w", err)
	}
	if inst.heapPtr, err = inst.call1(ctx, "opa_heap_ptr_get"); err != nil {
		return nil, err
	}
	return inst, nil
}

func (i *opaInstance) checkABI() error {
	major, minor := i.module.ExportedGlobal("opa_wasm_abi_version"), i.module.ExportedGlobal("opa_wasm_abi_minor_version")
	if major == nil || minor == nil {
		return errors.New("not an OPA wasm module: no ABI version globals")
	}
	if major.Get() != 1 || minor.Get() < 2 {
		return fmt.Errorf("OPA wasm ABI %d.%d is not supported (need 1.2 or later)", major.Get(), minor.Get())
	}
	return nil
}

// loadBuiltins checks the built-ins the module imports against the allow-list and binds them to
// OPA's Go implementations. The `builtins` export is the module's own list, so a precompiled
// policy.wasm is checked as strictly as Rego compiled here.
func (i *opaInstance) loadBuiltins(ctx context.Context, allowNetwork bool) error {
	ids, err := i.dumpJSONCall(ctx, "builtins")
	if err != nil {
		return fmt.Errorf("list built-ins: %w", err)
	}
	names := make([]string, 0, len(ids))
	for name := range ids {
		names = append(names, name)
	}
	if err := checkBuiltins(names, allowNetwork); err != nil {
		return err
	}
	i.builtins.funcs = map[int32]topdown.BuiltinFunc{}
	for name, id := range ids {
		f := topdown.GetBuiltin(name)
		if f == nil {
			return fmt.Errorf("policy uses built-in %q, which this OPA version does not have", name)
		}
		i.builtins.funcs[id] = guardBuiltin(name, f, i.outputLimit)
	}
	return nil
}

func (i *opaInstance) findEntrypoint(ctx context.Context, name string) (int32, error) {
	eps, err := i.dumpJSONCall(ctx, "entrypoints")
	if err != nil {
		return 0, fmt.Errorf("list entrypoints: %w", err)
	}
	if name == "" {
		names := make([]string, 0, len(eps))
		for n := range eps {
			names = append(names, n)
		}
		slices.Sort(names)
		if len(names) == 0 {
			return 0, errors.New("OPA module has no entrypoint")
		}
		name = names[0]
	}
	id, ok := eps[name]
	if !ok {
		return 0, fmt.Errorf("OPA module has no entrypoint %q (it has %v)", name, eps)
	}
	return id, nil
}

// dumpJSONCall calls a no-argument export returning a value and decodes it as {string: int}.
func (i *opaInstance) dumpJSONCall(ctx context.Context, fn string) (map[string]int32, error) {
	addr, err := i.call1(ctx, fn)
	if err != nil {
		return nil, err
	}
	s, err := i.call1(ctx, "opa_json_dump", uint64(addr))
	if err != nil {
		return nil, err
	}
	out := map[string]int32{}
	if err := json.Unmarshal([]byte(cString(i.mem, s)), &out); err != nil {
		return nil, fmt.Errorf("decode %s: %w", fn, err)
	}
	return out, nil
}

func (i *opaInstance) call1(ctx context.Context, fn string, args ...uint64) (uint32, error) {
	f := i.fn[fn]
	if f == nil {
		return 0, fmt.Errorf("OPA module does not export %s", fn)
	}
	res, err := f.Call(ctx, args...)
	if err != nil {
		i.broken = true
		return 0, guestError(ctx, err, nil)
	}
	if len(res) == 0 {
		return 0, nil
	}
	return api.DecodeU32(res[0]), nil
}

// write copies b into the guest heap at a fresh allocation.
func (i *opaInstance) write(ctx context.Context, b []byte) (uint32, error) {
	p, err := i.call1(ctx, "opa_malloc", uint64(len(b)))
	if err != nil {
		return 0, err
	}
	if !i.mem.Write(p, b) {
		return 0, errors.New("opa_malloc returned memory out of bounds")
	}
	return p, nil
}

func (i *opaInstance) parseJSON(ctx context.Context, b []byte) (uint32, error) {
	p, err := i.write(ctx, b)
	if err != nil {
		return 0, err
	}
	addr, err := i.call1(ctx, "opa_json_parse", uint64(p), uint64(len(b)))
	if err == nil && addr == 0 {
		err = errors.New("invalid JSON")
	}
	return addr, err
}

func (i *opaInstance) parseValue(ctx context.Context, b []byte) (uint32, error) {
	p, err := i.write(ctx, b)
	if err != nil {
		return 0, err
	}
	return i.call1(ctx, "opa_value_parse", uint64(p), uint64(len(b)))
}

func (i *opaInstance) dumpValue(ctx context.Context, addr uint32) (*ast.Term, error) {
	s, err := i.call1(ctx, "opa_value_dump", uint64(addr))
	if err != nil {
		return nil, err
	}
	text := cString(i.mem, s)
	checkOutput("built-in argument", uint64(len(text)), i.outputLimit)
	return ast.ParseTerm(text)
}

// eval evaluates the entrypoint on input (JSON) and returns the result set as JSON.
func (i *opaInstance) eval(ctx context.Context, input []byte) ([]byte, error) {
	defer i.builtins.endEval()
	inputAddr := i.heapPtr
	end := uint64(inputAddr) + uint64(len(input))
	if size := uint64(i.mem.Size()); end > size {
		pages := (end - size + wasmPageSize - 1) / wasmPageSize
		if _, ok := i.mem.Grow(uint32(pages)); !ok {
			return nil, fmt.Errorf("input of %d bytes exceeds the memory limit", len(input))
		}
	}
	if !i.mem.Write(inputAddr, input) {
		return nil, errors.New("write input into guest memory")
	}
	const formatJSON = 0
	res, err := i.call1(ctx, "opa_eval", 0, uint64(i.entrypoint), uint64(i.dataAddr),
		uint64(inputAddr), uint64(len(input)), uint64(inputAddr)+uint64(len(input)), formatJSON)
	if err != nil {
		return nil, err
	}
	data, ok := i.mem.Read(res, i.mem.Size()-res)
	if !ok {
		return nil, errors.New("OPA result out of guest memory")
	}
	if n := bytes.IndexByte(data, 0); n >= 0 {
		data = data[:n]
	}
	if uint64(len(data)) > i.outputLimit {
		i.broken = true // its heap holds the oversized result; start afresh
		return nil, &outputLimitError{what: "result set", limit: i.outputLimit}
	}
	// The result lives in guest memory the next evaluation overwrites.
	return append([]byte(nil), data...), nil
}

func (i *opaInstance) validate(ctx context.Context, input []byte) ([]byte, error) {
	return i.eval(ctx, input)
}

// validateSettings accepts any settings: Rego policies have no settings hook (as in Kubewarden).
func (i *opaInstance) validateSettings(context.Context, []byte) ([]byte, error) {
	return []byte(`{"valid":true}`), nil
}

func (i *opaInstance) reusable() bool { return !i.broken && !i.module.IsClosed() }

func (i *opaInstance) close() { _ = i.runtime.Close(context.Background()) }
