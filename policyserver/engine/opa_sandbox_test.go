package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// secretServer stands for cloud metadata or an internal service: it counts the requests that
// reach it and answers with a secret.
func secretServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "instance-role-credentials")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// loadRego compiles a Rego file of testdata/rego and loads it; the error is the first step's
// that failed.
func loadRego(t *testing.T, e *Engine, file string, spec Spec) (*Policy, error) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "testdata", "rego", file))
	if err != nil {
		t.Fatal(err)
	}
	if spec.Module, err = CompileRego(context.Background(), map[string]string{file: string(src)}, "policy/main", false); err != nil {
		return nil, err
	}
	spec.Name, spec.ExecutionMode = t.Name(), ModeOPA
	p, err := e.Load(context.Background(), spec)
	if err == nil {
		t.Cleanup(p.Close)
	}
	return p, err
}

func TestOPABuiltins_HTTPSendIsRefusedAtLoadByDefaultNamingTheBuiltin(t *testing.T) {
	e := newTestEngine(t, Options{})
	srv, hits := secretServer(t)
	p, err := loadRego(t, e, "exfiltrate.rego", Spec{Settings: json.RawMessage(fmt.Sprintf(`{"url":%q}`, srv.URL))})
	if err == nil {
		r, verr := p.Validate(context.Background(), podRequest(t, "default", nil))
		t.Fatalf("a policy calling http.send loaded; its answer: %+v (err %v), requests that reached the server: %d", r, verr, hits.Load())
	}
	if !strings.Contains(err.Error(), `"http.send"`) {
		t.Fatalf("the load error must name the built-in, got: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests reached the server while the policy was refused", n)
	}
}

func TestOPABuiltins_OPARuntimeIsRefusedNamingTheBuiltin(t *testing.T) {
	e := newTestEngine(t, Options{})
	p, err := loadRego(t, e, "runtime-env.rego", Spec{})
	if err == nil {
		r, verr := p.Validate(context.Background(), podRequest(t, "default", nil))
		t.Fatalf("a policy calling opa.runtime loaded; its answer: %+v (err %v)", r, verr)
	}
	if !strings.Contains(err.Error(), "opa.runtime") {
		t.Fatalf("the error must name the built-in, got: %v", err)
	}
}

func TestOPABuiltins_HTTPSendWorksWhenThePolicyOptsInToNetworkBuiltins(t *testing.T) {
	e := newTestEngine(t, Options{})
	srv, hits := secretServer(t)
	p, err := loadRego(t, e, "exfiltrate.rego", Spec{AllowNetworkBuiltins: true, Settings: json.RawMessage(fmt.Sprintf(`{"url":%q}`, srv.URL))})
	if err != nil {
		t.Fatalf("a policy allowed network built-ins must load: %v", err)
	}
	if r := validate(t, p, podRequest(t, "default", nil)); r.Accepted || r.Message != "instance-role-credentials" {
		t.Fatalf("want the server's answer as the denial, got %+v", r)
	}
	if hits.Load() == 0 {
		t.Fatal("the request never reached the server")
	}
}

func TestOPABuiltins_AllowListHasOnlyBuiltinsThisOPAKnows(t *testing.T) {
	known := map[string]bool{}
	for _, b := range ast.CapabilitiesForThisVersion().Builtins {
		known[b.Name] = true
	}
	for name := range pureBuiltins {
		if !known[name] {
			t.Errorf("allow-list names %q, which this OPA does not have", name)
		}
	}
	for name := range networkBuiltins {
		if !known[name] || pureBuiltins[name] {
			t.Errorf("network built-in %q is unknown to this OPA or also on the pure list", name)
		}
	}
	for _, never := range []string{"opa.runtime", "http.send", "net.lookup_ip_addr"} {
		if pureBuiltins[never] {
			t.Errorf("%s is on the pure allow-list", never)
		}
	}
}

func TestOPABuiltins_SprintfPaddingBombIsStoppedBeforeTheHostBuildsIt(t *testing.T) {
	e := newTestEngine(t, Options{})
	p, err := loadRego(t, e, "sprintf-bomb.rego", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	var verr error
	allocated := allocatedDuring(func() { _, verr = p.Validate(context.Background(), podRequest(t, "default", nil)) })
	if verr == nil || !strings.Contains(verr.Error(), "sprintf") {
		t.Fatalf("want an error naming sprintf, got %v", verr)
	}
	if allocated > 64<<20 {
		t.Fatalf("the host allocated %d MiB for a sprintf of a few kilobytes", allocated>>20)
	}
	if r := validate(t, load(t, e, Spec{Name: "latest", Module: regoModule(t, "disallow-latest.rego", "policy/main"), ExecutionMode: ModeOPA}),
		podRequest(t, "default", nil, container("c", "nginx:1", false))); !r.Accepted {
		t.Fatalf("the engine must keep serving, got %+v", r)
	}
}

func TestSprintfFormat_OrdinaryFormatsPass_HugePaddingIsRefused(t *testing.T) {
	for format, ok := range map[string]bool{
		"%v": true, "container %s uses %d%%": true, "%-10s|%08.3f": true, "%[1]v %[1]q": true, "100%": true,
		"%1025d": false, "%.5000f": false, "%*d": false, "%[2]*[1]d": false, "ok %d then %999999d": false,
	} {
		if err := checkFormat(format); (err == nil) != ok {
			t.Errorf("checkFormat(%q) = %v, want ok=%v", format, err, ok)
		}
	}
}
