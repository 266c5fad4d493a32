package engine

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
)

// The modules Regent's tests and benchmarks serve are what the Go and OPA toolchains emit; each
// must get the loop checks, or it silently runs at wazero's slower check.
func TestInstrumentLoops_GoGuestsAndOPAModulesAreInstrumented(t *testing.T) {
	mods := map[string][]byte{
		"wapc-labels (Go reactor)":        guest(t, "wapc-labels"),
		"wasi-privileged (Go command)":    guest(t, "wasi-privileged"),
		"disallow-latest.rego (OPA wasm)": regoModule(t, "disallow-latest.rego", "policy/main"),
	}
	ctx := context.Background()
	for name, m := range mods {
		out, err := instrumentLoops(m)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		r := wazero.NewRuntime(ctx)
		_, err = r.CompileModule(ctx, out)
		if err != nil {
			t.Errorf("%s: the instrumented module does not compile: %v", name, err)
		} else if !importsLoopCheck(t, out) {
			t.Errorf("%s: the instrumented module does not import %s.%s", name, loopCheckModule, loopCheckFunc)
		}
		_ = r.Close(ctx)
	}
}

// importsLoopCheck reads a module's import section for the loop checks' function.
func importsLoopCheck(t *testing.T, module []byte) bool {
	t.Helper()
	r := &reader{b: module, i: 8}
	for r.i < len(r.b) {
		id, payload := r.byte(), r.bytes(int(r.u32()))
		if id != secImport {
			continue
		}
		ir := &reader{b: payload}
		for range ir.u32() {
			module, name := string(ir.bytes(int(ir.u32()))), string(ir.bytes(int(ir.u32())))
			switch ir.byte() {
			case importFunc:
				ir.u32()
			case importMem:
				ir.limits()
			default:
				t.Fatal("the test reads function and memory imports only")
			}
			if module == loopCheckModule && name == loopCheckFunc {
				return true
			}
		}
	}
	return false
}

// A module with an instruction the rewriter does not decode (here a SIMD one) is left as it is
// and runs with wazero's own check.
func TestInstrumentLoops_UnknownInstructionLeavesTheModuleToWazerosCheck(t *testing.T) {
	// (module (func (drop (v128.const i64x2 0 0))))
	simd := []byte("\x00asm\x01\x00\x00\x00" +
		"\x01\x04\x01\x60\x00\x00" + // type section: () -> ()
		"\x03\x02\x01\x00" + // function section: one function of type 0
		"\x0a\x17\x01\x15\x00\xfd\x0c" + strings.Repeat("\x00", 16) + "\x1a\x0b") // code: v128.const, drop, end
	if _, err := instrumentLoops(simd); !errors.Is(err, errNotInstrumentable) {
		t.Fatalf("want errNotInstrumentable, got %v", err)
	}
	e := newTestEngine(t, Options{})
	if p := e.prepare(simd); p.interruptible || string(p.module) != string(simd) {
		t.Fatal("an uninstrumentable module must be compiled as given, with wazero's check")
	}
}

// A Rego policy that runs far past its deadline is stopped at it, with the loop checks and with
// wazero's own check, while garbage collections keep stopping the world: a guest that never left
// for Go would hold a collection, and with it the timer that ends its context, forever.
func TestTimeout_RegoThatRunsPastItsDeadlineIsStopped(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			default:
				runtime.GC()
			}
		}
	}()
	for _, closeOnDone := range []bool{false, true} {
		t.Run(map[bool]string{false: "loop checks", true: "wazero's check"}[closeOnDone], func(t *testing.T) {
			e := newTestEngine(t, Options{CloseOnContextDone: closeOnDone})
			busy := load(t, e, Spec{Module: regoModule(t, "busy-loop.rego", "policy/main"), ExecutionMode: ModeOPA,
				Entrypoint: "policy/main", Timeout: 200 * time.Millisecond})
			req := podRequest(t, "default", nil, container("c", "nginx:1", false))
			for range 2 { // the second call gets a replacement for the instance the first one lost
				if _, err := busy.Validate(context.Background(), req); !errors.Is(err, ErrTimeout) {
					t.Fatalf("want a timeout, got %v", err)
				}
			}
		})
	}
}

// wazero's own check stays available (Options.CloseOnContextDone) and stops a spinning waPC guest
// as the loop checks do (TestTimeout_InfiniteLoopIsStoppedAndThePolicyKeepsServing).
func TestTimeout_InfiniteLoopIsStoppedWithWazerosCheck(t *testing.T) {
	e := newTestEngine(t, Options{CloseOnContextDone: true})
	loop := load(t, e, Spec{Module: guest(t, "wapc-misbehave"), Timeout: 200 * time.Millisecond,
		Settings: json.RawMessage(`{"behaviour":"loop"}`)})
	if _, err := loop.Validate(context.Background(), podRequest(t, "default", nil)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("want a timeout, got %v", err)
	}
}

// A call whose context has ended before it starts does not run, and the instance is not reused.
func TestInterrupt_EndedContextIsNotRun(t *testing.T) {
	e := newTestEngine(t, Options{})
	p := load(t, e, Spec{Module: guest(t, "wapc-labels"), Settings: json.RawMessage(`{"required":["team"]}`)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Validate(ctx, podRequest(t, "default", map[string]string{"team": "a"}))
	if err == nil || !strings.Contains(err.Error(), "cancel") {
		t.Fatalf("want a cancelled evaluation, got %v", err)
	}
	if r := validate(t, p, podRequest(t, "default", map[string]string{"team": "a"})); !r.Accepted {
		t.Fatalf("the policy must keep serving, got %+v", r)
	}
}

// Fuel counts instructions, not iterations: a loop that calls a long function, or whose own
// body is long, reaches the check as often per instruction run as a tight loop does. Otherwise a
// guest could stay away from Go (and hold up every garbage collection of the server) for
// loopFuel iterations of a body as long as it likes.
func TestInstrumentLoops_FuelCountsInstructionsNotIterations(t *testing.T) {
	const n, iterations = 5000, 1000                                                                 // 2n instructions a call or body, so 10 million in all
	long := func(b []byte) []byte { return append(b, []byte(strings.Repeat("\x41\x00\x1a", n))...) } // n × (i32.const 0; drop)
	countdown := []byte{0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, 0x0d, 0x00}                        // k--; br_if k != 0
	bodies := map[string][]byte{
		"a loop that calls a long function": append(append([]byte{0x00, 0x03, 0x40, 0x10, 0x00}, countdown...), 0x0b, 0x0b),
		"a loop with a long body":           append(append(long([]byte{0x00, 0x03, 0x40}), countdown...), 0x0b, 0x0b),
	}
	for name, run := range bodies {
		t.Run(name, func(t *testing.T) {
			function := func(b, body []byte) []byte { return append(appendU32(b, uint32(len(body))), body...) }
			code := function(function([]byte{0x02}, append(long([]byte{0x00}), 0x0b)), run)
			sec := func(b []byte, id byte, payload []byte) []byte {
				return append(appendU32(append(b, id), uint32(len(payload))), payload...)
			}
			m := []byte("\x00asm\x01\x00\x00\x00")
			m = sec(m, secType, []byte{0x02, 0x60, 0x00, 0x00, 0x60, 0x01, 0x7f, 0x00}) // () -> (), (i32) -> ()
			m = sec(m, 3, []byte{0x02, 0x00, 0x01})                                     // func 0: long, func 1: run
			m = sec(m, secExport, []byte{0x01, 0x03, 'r', 'u', 'n', 0x00, 0x01})
			m = sec(m, secCode, code)
			out, err := instrumentLoops(m)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			r := wazero.NewRuntime(ctx)
			defer r.Close(ctx)
			checks := 0
			if _, err := r.NewHostModuleBuilder(loopCheckModule).NewFunctionBuilder().
				WithFunc(func() int32 { checks++; return loopFuel }).Export(loopCheckFunc).Instantiate(ctx); err != nil {
				t.Fatal(err)
			}
			mod, err := r.Instantiate(ctx, out)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := mod.ExportedFunction("run").Call(ctx, iterations); err != nil {
				t.Fatal(err)
			}
			if want := iterations * 2 * n / loopFuel; checks < want {
				t.Fatalf("%d checks over %d iterations of %d instructions; want at least %d (one per %d instructions)",
					checks, iterations, 2*n, want, loopFuel)
			}
		})
	}
}
