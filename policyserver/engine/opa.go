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
	// inventory, when set, is the data document instead of the fixed data: dataBase is the heap
	// pointer the data is parsed at, and dataVersion the inventory version parsed there.
	inventory   *Inventory
	dataBase    uint32
	dataVersion uint64
	// dataSize is the size of the last full data load and patched what patches have added
	// since: replaced objects stay in the heap, so past dataSize+patchSlack a full reload
	// reclaims them.
	dataSize, patched int
}

// patchSlack is how much patched data an instance's heap may gather beyond its last full load.
const patchSlack = 1 << 20

// newOPAInstance instantiates the policy in a runtime of its own (see Engine.shared) and parses
// its data. entrypoint "" picks the module's first. A non-nil inventory replaces data, and is
// re-read whenever it has changed (see Inventory).
func (e *Engine) newOPAInstance(ctx context.Context, module prepared, entrypoint string, data []byte, inventory *Inventory, allowNetwork bool) (_ *opaInstance, err error) {
	r := wazero.NewRuntimeWithConfig(ctx, module.config)
	defer func() {
		if err != nil {
			_ = r.Close(context.Background())
		}
	}()
	compiled, err := r.CompileModule(ctx, module.module)
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

	inst := &opaInstance{runtime: r, fn: map[string]api.Function{}, outputLimit: e.opts.OutputLimitBytes, inventory: inventory}
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
	if err := instantiateLoopCheck(ctx, r); err != nil {
		return nil, fmt.Errorf("instantiate loop checks: %w", err)
	}
	if _, err := r.InstantiateWithConfig(ctx, opaEnvModule(minPages, maxPages), wazero.NewModuleConfig().WithName("env")); err != nil {
		return nil, fmt.Errorf("instantiate OPA memory module: %w", err)
	}
	c := &compiledModule{module: compiled, runtime: r, interruptible: module.interruptible}
	m, err := c.instantiate(ctx, wazero.NewModuleConfig().WithName("policy"), "_start")
	if err != nil {
		return nil, fmt.Errorf("instantiate OPA module: %w", err)
	}
	inst.module, inst.mem = m, m.Memory()
	for _, name := range append(opaRequiredExports, "opa_json_parse", "opa_free", "opa_heap_ptr_set",
		"opa_value_add_path", "opa_value_remove_path", "opa_value_free", "opa_heap_blocks_stash", "opa_heap_blocks_restore") {
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
	if inst.dataBase, err = inst.call1(ctx, "opa_heap_ptr_get"); err != nil {
		return nil, err
	}
	if inventory != nil {
		if err := inst.syncInventory(ctx); err != nil {
			return nil, err
		}
		return inst, nil
	}
	if err := inst.loadData(ctx, data); err != nil {
		return nil, err
	}
	return inst, nil
}

// loadData parses data at dataBase, over whatever data was there: evaluations reset the heap
// to just above the data, so nothing outlives it.
func (i *opaInstance) loadData(ctx context.Context, data []byte) error {
	if _, err := i.call1(ctx, "opa_heap_ptr_set", uint64(i.dataBase)); err != nil {
		return fmt.Errorf("reset heap for data: %w", err)
	}
	var err error
	if i.dataAddr, err = i.parseJSON(ctx, data); err != nil {
		i.broken = true
		return fmt.Errorf("load data: %w", err)
	}
	if i.heapPtr, err = i.call1(ctx, "opa_heap_ptr_get"); err != nil {
		return err
	}
	return nil
}

// syncInventory brings the instance's data to the inventory's current version: by patching
// the objects changed since the loaded version when it can, else by loading the snapshot.
func (i *opaInstance) syncInventory(ctx context.Context) error {
	if i.dataVersion != 0 && i.patched <= i.dataSize+patchSlack {
		changes, version, ok := i.inventory.changesSince(i.dataVersion)
		if ok {
			if err := i.patch(ctx, changes); err != nil {
				return fmt.Errorf("inventory: %w", err)
			}
			i.dataVersion = version
			return nil
		}
	}
	version, data, err := i.inventory.snapshot()
	if err != nil {
		return err
	}
	if version == i.dataVersion {
		return nil
	}
	if err := i.loadData(ctx, data); err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	i.dataVersion, i.dataSize, i.patched = version, len(data), 0
	return nil
}

// patch sets and removes objects in the loaded data, as OPA's own wasm SDK does: allocations
// go just above the data (where evaluations start), and the heap's free blocks are restored
// before and stashed after, so an evaluation's heap reset neither loses nor reuses them. A
// failure leaves the instance unusable (it is discarded), never half-patched and serving.
func (i *opaInstance) patch(ctx context.Context, changes []inventoryChange) (err error) {
	if len(changes) == 0 {
		return nil
	}
	defer func() {
		if err != nil {
			i.broken = true
		}
	}()
	if _, err := i.call1(ctx, "opa_heap_ptr_set", uint64(i.heapPtr)); err != nil {
		return err
	}
	if _, err := i.call1(ctx, "opa_heap_blocks_restore"); err != nil {
		return err
	}
	for _, c := range changes {
		path, err := json.Marshal(c.key.path())
		if err != nil {
			return err
		}
		pathAddr, err := i.parseJSON(ctx, path)
		if err != nil {
			return fmt.Errorf("parse path: %w", err)
		}
		var errc uint32
		if c.obj == nil {
			errc, err = i.call1(ctx, "opa_value_remove_path", uint64(i.dataAddr), uint64(pathAddr))
		} else {
			var valueAddr uint32
			if valueAddr, err = i.parseJSON(ctx, c.obj); err != nil {
				return fmt.Errorf("parse object: %w", err)
			}
			errc, err = i.call1(ctx, "opa_value_add_path", uint64(i.dataAddr), uint64(pathAddr), uint64(valueAddr))
			i.patched += len(c.obj)
		}
		if err != nil {
			return err
		}
		if _, err := i.call1(ctx, "opa_value_free", uint64(pathAddr)); err != nil {
			return err
		}
		// Removing an object whose parents a full load never created (it was never there)
		// is the only expected failure, and leaves nothing to undo.
		if errc != 0 && c.obj != nil {
			return fmt.Errorf("set %v: OPA error %d", c.key.path(), errc)
		}
	}
	if _, err := i.call1(ctx, "opa_heap_blocks_stash"); err != nil {
		return err
	}
	i.heapPtr, err = i.call1(ctx, "opa_heap_ptr_get")
	return err
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
	res, err := callUnlessDone(ctx, f, args...)
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
	if i.inventory != nil {
		if err := i.syncInventory(ctx); err != nil {
			return nil, err
		}
	}
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
