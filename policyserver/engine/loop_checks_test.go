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
