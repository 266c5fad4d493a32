package engine

import (
	"context"
	"encoding/json"
	"testing"
)

func TestCompile_OncePerDigestSharedByPoliciesAndReleasedWithTheLast(t *testing.T) {
	e := newTestEngine(t, Options{})
	module := guest(t, "wapc-labels")
	a, err := e.Load(context.Background(), Spec{Name: "a", Module: module, Settings: json.RawMessage(`{"required":["a"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Load(context.Background(), Spec{Name: "b", Module: module, Settings: json.RawMessage(`{"required":["b"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	compiled := func() (int, int) {
		e.mu.Lock()
		defer e.mu.Unlock()
		c := e.compiled[Digest(module)]
		if c == nil {
			return len(e.compiled), 0
		}
		return len(e.compiled), c.refs
	}
	if n, refs := compiled(); n != 1 || refs != 2 {
		t.Fatalf("want one compiled module used by two policies, got %d modules, %d refs", n, refs)
	}
	a.Close()
	if r := validate(t, b, podRequest(t, "default", nil)); r.Message != "missing required labels: b" {
		t.Fatalf("b must keep working after a is unloaded, got %+v", r)
	}
	b.Close()
	if n, _ := compiled(); n != 0 {
		t.Fatalf("the compiled module must be released with its last policy, %d left", n)
	}
}
