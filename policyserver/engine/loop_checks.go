package engine

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// wazero stops a call whose context ends only when the runtime is configured to close modules on
// context done, and it does so by leaving the compiled code for Go at the head of every loop
// iteration to look at the module's state. For the interpreter loops of a Rego policy or a Go
// guest that is most of the call: measured here, four-fifths of an OPA evaluation and of a waPC
// call (BenchmarkValidate, docs/benchmarks.md session 10).
//
// instrumentLoops gives the same guarantee more cheaply: it rewrites a module so that every loop
// iteration and every function call spends fuel (a global) in proportion to the instructions it
// may run, and when the fuel is out calls a host function (loopCheckModule.loopCheckFunc) that
// ends the call if its context has ended and otherwise refills the fuel. So the guest leaves for
// Go about once every loopFuel instructions instead of at every iteration. Leaving for Go matters beyond the context: compiled wasm cannot be preempted, so a guest
// that never leaves would also hold up the Go runtime's stop-the-world phases (a garbage
// collection) for as long as it runs, every goroutine with it — including the timer that would
// end its context.
//
// A start section would run inside instantiation, before any call the engine makes, so it becomes
// an export (startExport) the engine calls first. Modules it cannot rewrite with certainty
// (instructions or encodings it does not know, names taken) are left alone and run with wazero's
// own check instead.

// The host function the loop checks call, and the export a start section becomes.
const (
	loopCheckModule = "regent_loop"
	loopCheckFunc   = "check"
	startExport     = "regent_start"
)

// loopFuel is how many instructions (as instrumentCode charges them) run between two checks: a
// check costs what wazero's costs each iteration (~0.1–0.2 µs), far less than a million
// instructions, while a spinning guest still leaves for Go within about a millisecond.
const loopFuel = 1_000_000

// errNotInstrumentable is why a module runs with wazero's own check instead.
var errNotInstrumentable = errors.New("module not instrumentable")

func notInstrumentable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errNotInstrumentable, fmt.Sprintf(format, args...))
}

const (
	secCustom   = 0
	secType     = 1
	secImport   = 2
	secTable    = 4
	secMemory   = 5
	secGlobal   = 6
	secExport   = 7
	secStart    = 8
	secElement  = 9
	secCode     = 10
	secTag      = 13
	importFunc  = 0
	importTable = 1
	importMem   = 2
	importGlob  = 3
	importTag   = 4
)

type section struct {
	id      byte
	payload []byte
}

// instrumentLoops returns module with the fuel check at the head of every loop, or an error
// (errNotInstrumentable) when it cannot add them with certainty.
func instrumentLoops(module []byte) ([]byte, error) {
	if len(module) < 8 || !bytes.Equal(module[:8], []byte("\x00asm\x01\x00\x00\x00")) {
		return nil, notInstrumentable("not a wasm 1.0 binary")
	}
	var sections []section
	r := &reader{b: module, i: 8}
	for r.i < len(r.b) {
		id := r.byte()
		size := r.u32()
		payload := r.bytes(int(size))
		if r.err != nil {
			return nil, notInstrumentable("section %d: %v", id, r.err)
		}
		sections = append(sections, section{id, payload})
	}
	if indexOf(sections, secCode) < 0 {
		return module, nil // nothing runs, nothing loops
	}

	m := &rewrite{}
	var err error
	// Types: the check's type, () -> i32, goes last.
	var types []byte
	if at := indexOf(sections, secType); at >= 0 {
		if types, m.checkType, err = appendCheckType(sections[at].payload); err != nil {
			return nil, err
		}
		sections[at].payload = types
	} else {
		sections = insertSection(sections, section{secType, []byte{1, 0x60, 0, 1, 0x7f}})
	}
	// Imports: the check goes after the module's own, so it is function number importedFuncs
	// and every function the module defines moves up by one.
	var imports []byte
	if at := indexOf(sections, secImport); at >= 0 {
		if imports, err = m.appendCheckImport(sections[at].payload); err != nil {
			return nil, err
		}
		sections[at].payload = imports
	} else {
		imports = appendU32(nil, 1)
		imports = appendCheckImportEntry(imports, m.checkType)
		sections = insertSection(sections, section{secImport, imports})
	}
	// Globals: the fuel goes after the module's own; no global index moves.
	var globals []byte
	if at := indexOf(sections, secGlobal); at >= 0 {
		if globals, err = m.appendFuelGlobal(sections[at].payload); err != nil {
			return nil, err
		}
		sections[at].payload = globals
	} else {
		m.fuel = m.importedGlobals
		sections = insertSection(sections, section{secGlobal, appendFuelEntry(appendU32(nil, 1))})
	}

	var startFunc uint32
	hasStart := false
	if at := indexOf(sections, secStart); at >= 0 {
		sr := &reader{b: sections[at].payload}
		if startFunc, hasStart = sr.u32(), true; sr.err != nil {
			return nil, notInstrumentable("start section: %v", sr.err)
		}
		sections = slices.Delete(sections, at, at+1)
	}
	var exports []byte
	if at := indexOf(sections, secExport); at >= 0 {
		if exports, err = m.rewriteExports(sections[at].payload, hasStart, startFunc); err != nil {
			return nil, err
		}
		sections[at].payload = exports
	} else if hasStart {
		exports = appendExport(appendU32(nil, 1), startExport, importFunc, m.fn(startFunc))
		sections = insertSection(sections, section{secExport, exports})
	}
	if at := indexOf(sections, secElement); at >= 0 {
		if sections[at].payload, err = m.rewriteElements(sections[at].payload); err != nil {
			return nil, err
		}
	}
	at := indexOf(sections, secCode)
	if sections[at].payload, err = m.instrumentCode(sections[at].payload); err != nil {
		return nil, err
	}

	out := make([]byte, 0, len(module)+len(module)/16)
	out = append(out, module[:8]...)
	for _, s := range sections {
		if s.id == secCustom {
			// Function names and debugging information name functions by the indices, and
			// code by the offsets, that the rewrite moved.
			nr := &reader{b: s.payload}
			if name := string(nr.bytes(int(nr.u32()))); nr.err != nil || name == "name" || strings.HasPrefix(name, ".debug_") {
				continue
			}
		}
		out = append(out, s.id)
		out = appendU32(out, uint32(len(s.payload)))
		out = append(out, s.payload...)
	}
	return out, nil
}

// rewrite is what instrumenting one module needs to know of it.
type rewrite struct {
	checkType       uint32
	importedFuncs   uint32
	importedGlobals uint32
	fuel            uint32
}

// fn is where the module's function i is once the check is imported.
func (m *rewrite) fn(i uint32) uint32 {
	if i >= m.importedFuncs {
		return i + 1
	}
	return i
}

func appendCheckType(payload []byte) ([]byte, uint32, error) {
	r := &reader{b: payload}
	n := r.u32()
	for range n {
		if form := r.byte(); form != 0x60 {
			return nil, 0, notInstrumentable("type form 0x%02x", form)
		}
		for range 2 { // parameters, results
			for range r.u32() {
				r.valType()
			}
		}
	}
	if r.err != nil || r.i != len(r.b) {
		return nil, 0, notInstrumentable("type section: %v", r.err)
	}
	out := appendU32(nil, n+1)
	out = append(out, payload[lebLen(payload):]...)
	return append(out, 0x60, 0, 1, 0x7f), n, nil
}

func appendCheckImportEntry(b []byte, typ uint32) []byte {
	b = appendU32(b, uint32(len(loopCheckModule)))
	b = append(b, loopCheckModule...)
	b = appendU32(b, uint32(len(loopCheckFunc)))
	b = append(b, loopCheckFunc...)
	b = append(b, importFunc)
	return appendU32(b, typ)
}

func (m *rewrite) appendCheckImport(payload []byte) ([]byte, error) {
	r := &reader{b: payload}
	n := r.u32()
	for range n {
		module := r.bytes(int(r.u32()))
		r.bytes(int(r.u32()))
		if string(module) == loopCheckModule {
			return nil, notInstrumentable("it imports from %s", loopCheckModule)
		}
		switch kind := r.byte(); kind {
		case importFunc:
			r.u32()
			m.importedFuncs++
		case importTable:
			r.byte() // reference type
			r.limits()
		case importMem:
			r.limits()
		case importGlob:
			r.valType()
			r.byte() // mutability
			m.importedGlobals++
		case importTag:
			r.byte()
			r.u32()
		default:
			return nil, notInstrumentable("import kind %d", kind)
		}
	}
	if r.err != nil || r.i != len(r.b) {
		return nil, notInstrumentable("import section: %v", r.err)
	}
	out := appendU32(nil, n+1)
	out = append(out, payload[lebLen(payload):]...)
	return appendCheckImportEntry(out, m.checkType), nil
}

// appendFuelEntry appends the fuel global: a mutable i32 starting full.
func appendFuelEntry(b []byte) []byte {
	b = append(b, 0x7f, 0x01, 0x41)
	b = appendS32(b, loopFuel)
	return append(b, 0x0b)
}

func (m *rewrite) appendFuelGlobal(payload []byte) ([]byte, error) {
	r := &reader{b: payload}
	n := r.u32()
	out := appendU32(nil, n+1)
	for range n {
		start := r.i
		r.valType()
		r.byte()
		out = append(out, payload[start:r.i]...)
		out = m.constExpr(r, out)
	}
	if r.err != nil || r.i != len(r.b) {
		return nil, notInstrumentable("global section: %v", r.err)
	}
	m.fuel = m.importedGlobals + n
	return appendFuelEntry(out), nil
}

func (m *rewrite) rewriteExports(payload []byte, hasStart bool, startFunc uint32) ([]byte, error) {
	r := &reader{b: payload}
	n := r.u32()
	var body []byte
	for range n {
		l := r.u32()
		name := r.bytes(int(l))
		kind := r.byte()
		idx := r.u32()
		if string(name) == startExport {
			return nil, notInstrumentable("it already exports %s", name)
		}
		if kind == importFunc {
			idx = m.fn(idx)
		}
		body = appendExport(body, string(name), kind, idx)
	}
	if r.err != nil || r.i != len(r.b) {
		return nil, notInstrumentable("export section: %v", r.err)
	}
	if hasStart {
		body = appendExport(body, startExport, importFunc, m.fn(startFunc))
		n++
	}
	return append(appendU32(nil, n), body...), nil
}

// rewriteElements moves the function indices of element segments, in each of their encodings.
func (m *rewrite) rewriteElements(payload []byte) ([]byte, error) {
	r := &reader{b: payload}
	n := r.u32()
	out := appendU32(nil, n)
	for range n {
		flags := r.u32()
		out = appendU32(out, flags)
		if flags > 7 {
			return nil, notInstrumentable("element segment flags %d", flags)
		}
		if flags == 2 || flags == 6 {
			out = appendU32(out, r.u32()) // table
		}
		if flags&1 == 0 {
			out = m.constExpr(r, out) // offset
		}
		if flags&3 != 0 {
			out = append(out, r.byte()) // element kind or reference type
		}
		count := r.u32()
		out = appendU32(out, count)
		for range count {
			if flags&4 == 0 {
				out = appendU32(out, m.fn(r.u32()))
			} else {
				out = m.constExpr(r, out)
			}
		}
	}
	if r.err != nil || r.i != len(r.b) {
		return nil, notInstrumentable("element section: %v", r.err)
	}
	return out, nil
}

// constExpr copies a constant expression, moving the index of ref.func.
func (m *rewrite) constExpr(r *reader, out []byte) []byte {
	for r.err == nil {
		start := r.i
		switch op := r.byte(); op {
		case 0x0b:
			return append(out, op)
		case 0x41, 0x42:
			r.s64()
		case 0x43:
			r.bytes(4)
		case 0x44:
			r.bytes(8)
		case 0x23:
			r.u32()
		case 0xd0:
			r.valType()
		case 0xd2:
			out = append(out, op)
			out = appendU32(out, m.fn(r.u32()))
			continue
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constant expressions
		default:
			r.fail(fmt.Errorf("constant expression opcode 0x%02x", op))
		}
		out = append(out, r.b[start:r.i]...)
	}
	return out
}

// instrumentCode copies the code section, moving called function indices and adding, at the
// start of every function body and after every loop instruction, a charge of cost units:
//
//	global.get $fuel
//	i32.const cost
//	i32.sub
//	global.set $fuel
//	global.get $fuel
//	i32.const 0
//	i32.le_s
//	if
//	  call $check
//	  global.set $fuel
//	end
//
// which leaves the operand stack as it was, so it is valid in any loop or body, reachable or not.
// A loop's cost is the instructions of its body and a function's the instructions of its whole
// body, so fuel counts instructions, not iterations: a loop whose body is long, or that calls a
// long function, checks as often as a tight one per instruction run. Between two charges a guest
// runs at most one function's or one loop body's instructions, so it leaves for Go at least every
// loopFuel instructions plus the longest body.
func (m *rewrite) instrumentCode(payload []byte) ([]byte, error) {
	fuel := appendU32(nil, m.fuel)
	check := func(out []byte, cost int) []byte {
		out = append(append(out, 0x23), fuel...)
		out = appendS32(append(out, 0x41), int32(min(max(cost, 1), loopFuel)))
		out = append(append(out, 0x6b, 0x24), fuel...)
		out = append(append(out, 0x23), fuel...)
		out = append(out, 0x41, 0x00, 0x4c, 0x04, 0x40, 0x10)
		out = appendU32(out, m.importedFuncs)
		out = append(append(out, 0x24), fuel...)
		return append(out, 0x0b)
	}

	r := &reader{b: payload}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(payload)+len(payload)/4), n)
	var body []byte
	for f := range n {
		size := r.u32()
		b := r.bytes(int(size))
		if r.err != nil {
			return nil, notInstrumentable("function %d: %v", f, r.err)
		}
		var err error
		if body, err = m.instrumentBody(body[:0], b, check); err != nil {
			return nil, notInstrumentable("function %d: %v", f, err)
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if r.i != len(r.b) {
		return nil, notInstrumentable("code section: %d trailing bytes", len(r.b)-r.i)
	}
	return out, nil
}

// instr is one decoded instruction of a body: its bytes, and what the rewrite needs of it.
type instr struct {
	start, end int
	op         byte
	// fn is the function index of a call, return_call or ref.func (moved by the rewrite).
	fn uint32
	// cost is, for a loop, the instructions up to its end; 0 for anything else.
	cost int
}

// instrumentBody walks one function body instruction by instruction, which it must to tell a
// loop opcode from the same byte inside an immediate; an instruction it does not know ends the
// attempt.
func (m *rewrite) instrumentBody(out, body []byte, check func([]byte, int) []byte) ([]byte, error) {
	r := &reader{b: body}
	for range r.u32() { // local declarations: count and type
		r.u32()
		r.valType()
	}
	if r.err != nil {
		return nil, r.err
	}
	locals := r.i
	instrs, err := decodeBody(r)
	if err != nil {
		return nil, err
	}
	out = check(append(out, body[:locals]...), len(instrs))
	for _, in := range instrs {
		switch in.op {
		case 0x10, 0x12, 0xd2:
			out = appendU32(append(out, in.op), m.fn(in.fn))
		default:
			out = append(out, body[in.start:in.end]...)
		}
		if in.op == 0x03 {
			out = check(out, in.cost)
		}
	}
	return out, nil
}

// decodeBody decodes the instructions of a body from r (past its locals), with each loop's cost:
// the instructions between it and its end.
func decodeBody(r *reader) ([]instr, error) {
	var instrs []instr
	var open []int // the instruction indices of the blocks, ifs and loops not yet ended
	for r.i < len(r.b) {
		start := r.i
		op := r.byte()
		in := instr{start: start, op: op}
		switch {
		case op == 0x0b: // end: of the innermost open block, or of the body
			if n := len(open); n > 0 {
				if o := open[n-1]; instrs[o].op == 0x03 {
					instrs[o].cost = len(instrs) - o
				}
				open = open[:n-1]
			}
		case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0f || op == 0x1a || op == 0x1b || op == 0xd1:
			// unreachable, nop, else, return, drop, select, ref.is_null
		case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
			r.blockType()
			open = append(open, len(instrs))
		case op == 0x10 || op == 0x12 || op == 0xd2: // call, return_call, ref.func
			in.fn = r.u32()
		case op == 0x0c || op == 0x0d || (op >= 0x20 && op <= 0x26):
			// br, br_if, local/global/table get-set-tee
			r.u32()
		case op == 0x0e: // br_table
			for range r.u32() {
				r.u32()
			}
			r.u32()
		case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
			r.u32()
			r.u32()
		case op == 0x1c: // select t*
			for range r.u32() {
				r.valType()
			}
		case op >= 0x28 && op <= 0x3e: // loads and stores
			r.memArg()
		case op == 0x3f || op == 0x40: // memory.size, memory.grow
			if r.byte() != 0 {
				return nil, errors.New("multiple memories")
			}
		case op == 0x41 || op == 0x42:
			r.s64()
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op >= 0x45 && op <= 0xc4: // numeric, sign extension
		case op == 0xd0: // ref.null
			r.valType()
		case op == 0xfc:
			if err := r.miscOp(); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("opcode 0x%02x at %d", op, start)
		}
		if r.err != nil {
			return nil, r.err
		}
		in.end = r.i
		instrs = append(instrs, in)
	}
	return instrs, nil
}

func appendExport(b []byte, name string, kind byte, index uint32) []byte {
	b = appendU32(b, uint32(len(name)))
	b = append(b, name...)
	b = append(b, kind)
	return appendU32(b, index)
}

// insertSection puts a known section where the binary format orders it: before the first
// section that must follow it (custom sections aside).
func insertSection(sections []section, s section) []section {
	order := func(id byte) int {
		// Section order of the spec: tag (13) sits between memory and global; data count (12)
		// between element and code.
		switch id {
		case secTag:
			return 55
		case 12:
			return 95
		}
		return int(id) * 10
	}
	at := len(sections)
	for i, x := range sections {
		if x.id != secCustom && order(x.id) > order(s.id) {
			at = i
			break
		}
	}
	return append(sections[:at], append([]section{s}, sections[at:]...)...)
}

func indexOf(sections []section, id byte) int {
	for i, s := range sections {
		if s.id == id {
			return i
		}
	}
	return -1
}

// reader decodes the binary format; the first error sticks and later reads return zeros.
type reader struct {
	b   []byte
	i   int
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.i = len(r.b)
}

func (r *reader) byte() byte {
	if r.i >= len(r.b) {
		r.fail(errors.New("unexpected end"))
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || r.i+n > len(r.b) {
		r.fail(errors.New("unexpected end"))
		return nil
	}
	b := r.b[r.i : r.i+n]
	r.i += n
	return b
}

func (r *reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail(errors.New("LEB128 too long"))
	return 0
}

// s64 skips a signed LEB128 of up to 64 bits (also s32 and s33).
func (r *reader) s64() {
	for n := 0; n < 10; n++ {
		if r.byte()&0x80 == 0 {
			return
		}
	}
	r.fail(errors.New("LEB128 too long"))
}

func (r *reader) limits() {
	flags := r.byte()
	if flags > 3 {
		r.fail(fmt.Errorf("limits flags 0x%02x", flags))
		return
	}
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

// valType reads a value type of one byte: numeric, vector or a reference of wasm 2.0.
func (r *reader) valType() {
	switch t := r.byte(); t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
	default:
		r.fail(fmt.Errorf("value type 0x%02x", t))
	}
}

// blockType reads empty, a value type, or a type index (a non-negative s33).
func (r *reader) blockType() {
	if r.i >= len(r.b) {
		r.fail(errors.New("unexpected end"))
		return
	}
	switch r.b[r.i] {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		r.i++
		return
	}
	if r.b[r.i]&0x40 != 0 && r.b[r.i]&0x80 == 0 {
		r.fail(fmt.Errorf("block type 0x%02x", r.b[r.i]))
		return
	}
	r.s64()
}

func (r *reader) memArg() {
	if align := r.u32(); align&0x40 != 0 {
		r.fail(errors.New("multiple memories"))
	}
	r.u32()
}

// miscOp reads the 0xfc prefixed instructions of wasm 2.0: saturating truncation, bulk memory
// and table operations.
func (r *reader) miscOp() error {
	switch op := r.u32(); {
	case op <= 7:
	case op == 8: // memory.init
		r.u32()
		r.byte()
	case op == 9 || op == 13 || (op >= 15 && op <= 17): // data.drop, elem.drop, table.grow/size/fill
		r.u32()
	case op == 10: // memory.copy
		r.byte()
		r.byte()
	case op == 11: // memory.fill
		r.byte()
	case op == 12 || op == 14: // table.init, table.copy
		r.u32()
		r.u32()
	default:
		return fmt.Errorf("opcode 0xfc %d", op)
	}
	return r.err
}

// appendS32 appends v as a signed LEB128 (what i32.const takes).
func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// lebLen is the length of the LEB128 at the start of b.
func lebLen(b []byte) int {
	for i, c := range b {
		if c&0x80 == 0 {
			return i + 1
		}
	}
	return len(b)
}
