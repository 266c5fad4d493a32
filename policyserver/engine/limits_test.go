package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTimeout_InfiniteLoopIsStoppedAndThePolicyKeepsServing(t *testing.T) {
	e := newTestEngine(t, Options{})
	loop := load(t, e, Spec{Module: guest(t, "wapc-misbehave"), Timeout: 200 * time.Millisecond,
		Settings: json.RawMessage(`{"behaviour":"loop"}`)})
	healthy := load(t, e, Spec{Module: guest(t, "wapc-misbehave")})

	req := podRequest(t, "default", nil, container("c", "nginx:1", false))
	for range 2 { // the second call gets a replacement for the instance the first one lost
		_, err := loop.Validate(context.Background(), req)
		if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "limit 200ms") {
			t.Fatalf("want a timeout naming its limit, got %v", err)
		}
	}
	if r := validate(t, healthy, req); !r.Accepted {
		t.Fatalf("the same module under another policy must keep serving, got %+v", r)
	}
}

func TestTimeout_WASICommandIsStopped(t *testing.T) {
	e := newTestEngine(t, Options{})
	p := load(t, e, Spec{Module: guest(t, "wasi-privileged"), ExecutionMode: ModeWASI, Timeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Validate(ctx, podRequest(t, "default", nil)); err == nil {
		t.Fatal("want an error from a cancelled evaluation")
	}
	if r := validate(t, p, podRequest(t, "default", nil, container("c", "nginx:1", true))); r.Accepted {
		t.Fatalf("after a cancelled run the policy must still answer, got %+v", r)
	}
}

func TestMemoryLimit_GuestThatGrowsWithoutBoundIsStoppedWithAClearError(t *testing.T) {
	e := newTestEngine(t, Options{MemoryLimitBytes: 32 << 20})
	// A generous deadline: this test is about memory, and a slow machine must not turn it into a timeout.
	p := load(t, e, Spec{Module: guest(t, "wapc-misbehave"), Timeout: time.Minute, Settings: json.RawMessage(`{"behaviour":"allocate"}`)})
	_, err := p.Validate(context.Background(), podRequest(t, "default", nil))
	if err == nil || !strings.Contains(err.Error(), "out of memory") {
		t.Fatalf("want an out-of-memory error, got %v", err)
	}
}

func TestTrap_GuestPanicIsAnErrorNotACrash(t *testing.T) {
	e := newTestEngine(t, Options{})
	p := load(t, e, Spec{Module: guest(t, "wapc-misbehave"), Settings: json.RawMessage(`{"behaviour":"trap"}`)})
	_, err := p.Validate(context.Background(), podRequest(t, "default", nil))
	if err == nil || !strings.Contains(err.Error(), "policy panicked on purpose") {
		t.Fatalf("want the guest's panic message, got %v", err)
	}
}

func TestLoad_BadModulesFailWithAClearError(t *testing.T) {
	e := newTestEngine(t, Options{})
	rego := regoModule(t, "disallow-latest.rego", "policy/main")
	cases := []struct {
		name string
		spec Spec
		want string
	}{
		{"not wasm", Spec{Module: []byte("#!/bin/sh\necho hi\n")}, "module is not WebAssembly"},
		{"truncated wasm", Spec{Module: []byte("\x00asm\x01\x00\x00\x00\x01\x05")}, "compile module"},
		{"WASI command as waPC", Spec{Module: guest(t, "wasi-privileged"), ExecutionMode: ModeWaPC}, "does not export __guest_call"},
		{"waPC reactor as WASI", Spec{Module: guest(t, "wapc-labels"), ExecutionMode: ModeWASI}, "does not export _start"},
		{"waPC module as OPA", Spec{Module: guest(t, "wapc-labels"), ExecutionMode: ModeOPA}, "not an OPA wasm module"},
		{"OPA module as waPC", Spec{Module: rego, ExecutionMode: ModeWaPC}, "does not export __guest_call"},
		{"settings not JSON", Spec{Module: rego, ExecutionMode: ModeOPA, Settings: json.RawMessage("{")}, "settings are not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.spec.Name = c.name
			_, err := e.Load(context.Background(), c.spec)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error containing %q, got %v", c.want, err)
			}
		})
	}
}

func TestCompileRego_SyntaxErrorNamesTheProblem(t *testing.T) {
	_, err := CompileRego(context.Background(), map[string]string{"p.rego": "package p\nallow if {"}, "p/allow", false)
	if err == nil || !strings.Contains(err.Error(), "p.rego") {
		t.Fatalf("want a parse error naming the file, got %v", err)
	}
}

func TestParseConstraintTemplate_RejectsOtherKinds(t *testing.T) {
	_, err := ParseConstraintTemplate([]byte("apiVersion: v1\nkind: ConfigMap\n"))
	if err == nil || !strings.Contains(err.Error(), "not a Gatekeeper ConstraintTemplate") {
		t.Fatalf("got %v", err)
	}
}
