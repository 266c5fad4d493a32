package capabilities

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"

	"regent.dev/regent/policyserver/engine"
)

func TestTracingLog_GuestLinesReachTheServersLogger(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 1})
	h, _ := New(Options{Logger: log})
	for _, payload := range []string{
		`{"level":"warn","message":"namespace has no owner","namespace":"shop","attempt":2}`,
		`{"level":"debug","msg":"looked up","kind":"Namespace"}`,
		`{"level":"error","message":"lookup failed"}`,
		`not json`,
	} {
		if _, err := h.Call(context.Background(), engine.HostCall{Policy: "clusterwide-ctx", Binding: "kubewarden", Namespace: "tracing", Operation: "log", Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		`"msg"="namespace has no owner" "policy"="clusterwide-ctx" "attempt"=2 "namespace"="shop" "level"="warn"`,
		`"msg"="looked up" "policy"="clusterwide-ctx" "kind"="Namespace"`,
		`"msg"="lookup failed" "error"=null "policy"="clusterwide-ctx"`,
		`"msg"="not json" "policy"="clusterwide-ctx"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines: %q", len(lines), lines)
	}
	for i := range want {
		if !strings.Contains(lines[i], want[i]) {
			t.Errorf("line %d: %s, want it to contain %s", i, lines[i], want[i])
		}
	}
}

func TestTracingLog_AnOversizedLineIsLoggedAsItsHeadOnly(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	h, _ := New(Options{Logger: log})
	huge := `{"level":"info","message":"` + strings.Repeat("x", 1<<20) + `"}`
	if _, err := h.Call(context.Background(), engine.HostCall{Policy: "p", Binding: "kubewarden", Namespace: "tracing", Operation: "log", Payload: []byte(huge)}); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || len(lines[0]) > 2*maxLogLine {
		t.Fatalf("want one line of at most about %d bytes, got %d lines, the first %d bytes long", maxLogLine, len(lines), len(lines[0]))
	}
	if !strings.Contains(lines[0], `"truncated"=true`) {
		t.Fatalf("a cut line must say so: %.200s", lines[0])
	}
}
