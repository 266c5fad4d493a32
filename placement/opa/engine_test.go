package opa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/util"
)

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// loadData writes every top-level document of data into the engine's store as the inventory
// would, one object per path.
func loadData(t *testing.T, e *Engine, data map[string]any) {
	t.Helper()
	ctx := context.Background()
	for res, objs := range data["kubernetes"].(map[string]any) {
		for name, obj := range objs.(map[string]any) {
			if err := writePath(ctx, e.Store(), storage.Path{InventoryRoot, res, name}, obj); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestQueriesMatchOPA evaluates a corpus of queries on the engine and on OPA's own Go API
// (rego.New with the same module and data) and wants identical results, undefined included.
func TestQueriesMatchOPA(t *testing.T) {
	module := readTestdata(t, "eu_pci.rego")
	var data map[string]any
	if err := util.UnmarshalJSON([]byte(readTestdata(t, "data.json")), &data); err != nil {
		t.Fatal(err)
	}
	e := NewEngine()
	if err := e.SetSource("ns/cm", map[string]string{"ns/cm/eu_pci.rego": module}); err != nil {
		t.Fatal(err)
	}
	loadData(t, e, data)

	corpus := []struct {
		path  string
		input string
	}{
		{"placement/eu_pci/allowed", ""},
		{"placement/eu_pci/decision", `{"clusters":["a"]}`},
		{"placement/eu_pci/decision", `{"clusters":["a","b","c"]}`},
		{"placement/eu_pci/errors", `{"clusters":["b","zz"]}`},
		{"placement/eu_pci/errors", ""},
		{"placement/eu_pci", `{"clusters":["c"]}`},
		{"kubernetes/managedclusters/a/metadata/labels", ""},
		{"kubernetes/addonplacementscores/a/s/status/scores/0/value", ""},
		{"kubernetes/managedclusters/nope", ""},
		{"placement/missing", `{}`},
		{"", ""},
	}
	ctx := context.Background()
	srv := &Handler{Engine: e}
	for _, q := range corpus {
		var input any
		if q.input != "" {
			if err := util.UnmarshalJSON([]byte(q.input), &input); err != nil {
				t.Fatal(err)
			}
		}
		var segs []string
		if q.path != "" {
			segs = strings.Split(q.path, "/")
		}
		got, gotDefined, err := e.Query(ctx, segs, input)
		if err != nil {
			t.Fatalf("engine %s: %v", q.path, err)
		}

		opts := []func(*rego.Rego){
			rego.Module("ns/cm/eu_pci.rego", module),
			rego.Store(inmem.NewFromObject(data)),
			rego.Query(DataRef(segs).String()),
		}
		if input != nil {
			opts = append(opts, rego.Input(input))
		}
		rs, err := rego.New(opts...).Eval(ctx)
		if err != nil {
			t.Fatalf("opa %s: %v", q.path, err)
		}
		wantDefined := len(rs) > 0
		var want any
		if wantDefined {
			want = rs[0].Expressions[0].Value
		}
		if gotDefined != wantDefined || !reflect.DeepEqual(canonical(t, got), canonical(t, want)) {
			t.Errorf("%s input %s: engine %v (defined %v), OPA %v (defined %v)", q.path, q.input, got, gotDefined, want, wantDefined)
		}

		// The same through the REST handler: {"result": …}, or {} when undefined.
		body := `{}`
		if q.input != "" {
			body = `{"input":` + q.input + `}`
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/data/"+q.path, strings.NewReader(body)))
		var resp map[string]any
		if err := util.UnmarshalJSON(rec.Body.Bytes(), &resp); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("POST %s: %d %s (%v)", q.path, rec.Code, rec.Body, err)
		}
		wantResp := map[string]any{}
		if wantDefined {
			wantResp["result"] = want
		}
		if q.input == "" {
			// OPA's server adds this warning when the body has no input key.
			wantResp["warning"] = map[string]any{"code": "api_usage_warning", "message": "'input' key missing from the request"}
		}
		if !reflect.DeepEqual(canonical(t, resp), canonical(t, wantResp)) {
			t.Errorf("POST %s input %s: %s, want %v", q.path, q.input, rec.Body, wantResp)
		}
	}
}

func canonical(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := util.UnmarshalJSON(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBadModuleKeepsLastGoodSet: a source whose new text does not compile changes nothing, the
// error names the module and line, and the other sources keep answering.
func TestBadModuleKeepsLastGoodSet(t *testing.T) {
	e := NewEngine()
	ctx := context.Background()
	if err := e.SetSource("ns/a", map[string]string{"ns/a/a.rego": "package a\n\nx := 1\n"}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetSource("ns/b", map[string]string{"ns/b/b.rego": "package b\n\ny := 2\n"}); err != nil {
		t.Fatal(err)
	}
	err := e.SetSource("ns/b", map[string]string{"ns/b/b.rego": "package b\n\ny := 2\nz := undefined_fn(1)\n"})
	var aerrs ast.Errors
	if !errors.As(err, &aerrs) || len(aerrs) == 0 || aerrs[0].Location == nil || aerrs[0].Location.File != "ns/b/b.rego" || aerrs[0].Location.Row != 4 {
		t.Fatalf("want a compile error at ns/b/b.rego:4, got %v", err)
	}
	for path, want := range map[string]any{"a/x": json.Number("1"), "b/y": json.Number("2")} {
		got, ok, err := e.Query(ctx, strings.Split(path, "/"), nil)
		if err != nil || !ok || got != want {
			t.Errorf("%s = %v (defined %v, err %v), want %v", path, got, ok, err, want)
		}
	}
}

// TestQueriesDuringReload queries from several goroutines while the module is replaced: every
// answer is one of the loaded versions, never an error or undefined.
func TestQueriesDuringReload(t *testing.T) {
	e := NewEngine()
	ctx := context.Background()
	set := func(v int) {
		if err := e.SetSource("ns/a", map[string]string{"ns/a/a.rego": fmt.Sprintf("package a\n\nv := %d\n", v)}); err != nil {
			t.Error(err)
		}
	}
	set(0)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				got, ok, err := e.Query(ctx, []string{"a", "v"}, map[string]any{"i": i})
				if err != nil || !ok {
					t.Errorf("query during reload: %v (defined %v, err %v)", got, ok, err)
					return
				}
			}
		}()
	}
	for v := 1; v <= 50; v++ {
		set(v)
	}
	wg.Wait()
	if got, _, _ := e.Query(ctx, []string{"a", "v"}, nil); got != json.Number("50") {
		t.Errorf("after reloads v = %v, want 50", got)
	}
}

// TestEvalErrorShape: a query whose evaluation fails answers 500 with OPA's error body.
func TestEvalErrorShape(t *testing.T) {
	e := NewEngine()
	if err := e.SetSource("ns/c", map[string]string{"ns/c/c.rego": "package c\n\nx := 1 if input.a\n\nx := 2 if input.b\n"}); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	(&Handler{Engine: e}).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/data/c/x", strings.NewReader(`{"input":{"a":true,"b":true}}`)))
	var body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Errors  []struct {
			Code string `json:"code"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusInternalServerError || body.Code != "internal_error" || len(body.Errors) != 1 || body.Errors[0].Code != "eval_conflict_error" {
		t.Errorf("conflicting rules: %d %s, want 500 internal_error with an eval_conflict_error", rec.Code, rec.Body)
	}
}

// TestEscapedPathSegments: a %2F inside a segment is part of the key, as in OPA's server.
func TestEscapedPathSegments(t *testing.T) {
	e := NewEngine()
	if err := writePath(context.Background(), e.Store(), storage.Path{"x", "a/b"}, "slash"); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	(&Handler{Engine: e}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/data/x/a%2Fb", nil))
	if !strings.Contains(rec.Body.String(), `"result":"slash"`) {
		t.Errorf("GET /v1/data/x/a%%2Fb: %d %s, want result slash", rec.Code, rec.Body)
	}
	// x.a.b is another document (undefined), not the prepared query of x["a/b"].
	rec = httptest.NewRecorder()
	(&Handler{Engine: e}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/data/x/a/b", nil))
	if strings.TrimSpace(rec.Body.String()) != "{}" {
		t.Errorf("GET /v1/data/x/a/b: %d %s, want {}", rec.Code, rec.Body)
	}
}

func TestParseGVR(t *testing.T) {
	for in, want := range map[string]string{
		"/v1/namespaces": "/v1, Resource=namespaces",
		"cluster.open-cluster-management.io/v1beta1/placements": "cluster.open-cluster-management.io/v1beta1, Resource=placements",
	} {
		gvr, err := ParseGVR(in)
		if err != nil || gvr.String() != want {
			t.Errorf("ParseGVR(%q) = %v, %v; want %s", in, gvr, err, want)
		}
	}
	for _, bad := range []string{"v1/namespaces", "a/b/c/d", "g//r", "g/v/"} {
		if _, err := ParseGVR(bad); err == nil {
			t.Errorf("ParseGVR(%q) accepted", bad)
		}
	}
}
