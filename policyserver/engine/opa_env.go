package engine

// An OPA-compiled policy.wasm imports its linear memory and its host functions from a module
// named "env". wazero's host modules can export functions but not a memory, so "env" is this
// tiny wasm module, generated here: it defines the memory (whose maximum is the engine's memory
// limit) and re-exports host functions it imports from the Go host module (a wasm module may
// export what it imports).

const opaHostModule = "regent_opa"

// opaHostFuncs lists the host functions in import order, with their parameter counts (all i32);
// the builtins return an i32, the others nothing.
var opaHostFuncs = []struct {
	name    string
	params  int
	returns bool
}{
	{"opa_abort", 1, false},
	{"opa_println", 1, false},
	{"opa_builtin0", 2, true},
	{"opa_builtin1", 3, true},
	{"opa_builtin2", 4, true},
	{"opa_builtin3", 5, true},
	{"opa_builtin4", 6, true},
}

func opaEnvModule(minPages, maxPages uint32) []byte {
	const (
		i32         = 0x7f
		funcType    = 0x60
		kindFunc    = 0x00
		kindMemory  = 0x02
		secType     = 1
		secImport   = 2
		secMemory   = 5
		secExport   = 7
		limitsMinMx = 0x01
	)
	out := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	section := func(id byte, body []byte) {
		out = append(out, id)
		out = appendULEB(out, uint32(len(body)))
		out = append(out, body...)
	}

	// One type per host function keeps the indices trivially aligned.
	types := appendULEB(nil, uint32(len(opaHostFuncs)))
	for _, f := range opaHostFuncs {
		types = append(types, funcType)
		types = appendULEB(types, uint32(f.params))
		for range f.params {
			types = append(types, i32)
		}
		if f.returns {
			types = append(types, 1, i32)
		} else {
			types = append(types, 0)
		}
	}
	section(secType, types)

	imports := appendULEB(nil, uint32(len(opaHostFuncs)))
	for i, f := range opaHostFuncs {
		imports = appendName(imports, opaHostModule)
		imports = appendName(imports, f.name)
		imports = append(imports, kindFunc)
		imports = appendULEB(imports, uint32(i))
	}
	section(secImport, imports)

	memory := []byte{1, limitsMinMx}
	memory = appendULEB(memory, minPages)
	memory = appendULEB(memory, maxPages)
	section(secMemory, memory)

	exports := appendULEB(nil, uint32(len(opaHostFuncs)+1))
	exports = appendName(exports, "memory")
	exports = append(exports, kindMemory, 0)
	for i, f := range opaHostFuncs {
		exports = appendName(exports, f.name)
		exports = append(exports, kindFunc)
		exports = appendULEB(exports, uint32(i))
	}
	section(secExport, exports)
	return out
}

func appendName(b []byte, s string) []byte {
	b = appendULEB(b, uint32(len(s)))
	return append(b, s...)
}

func appendULEB(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
