package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// The same check in two Go guests: wapc-labels decodes with encoding/json, wapc-labels-fastjson
// (the benchmark's fast waPC policy) without reflection; both must answer alike.
func TestWaPC_RequiredLabels_DeniesMissingAndAcceptsLabelled(t *testing.T) {
	for _, g := range []string{"wapc-labels", "wapc-labels-fastjson"} {
		t.Run(g, func(t *testing.T) {
			e := newTestEngine(t, Options{})
			p := load(t, e, Spec{Module: guest(t, g), ExecutionMode: ModeWaPC,
				Settings: json.RawMessage(`{"required":["team","tier"]}`)})

			r := validate(t, p, podRequest(t, "default", map[string]string{"team": "a"}, container("c", "nginx:1", false)))
			if r.Accepted || r.Message != "missing required labels: tier" {
				t.Fatalf("want denial naming tier, got %+v", r)
			}
			r = validate(t, p, podRequest(t, "default", nil, container("c", "nginx:1", false)))
			if r.Accepted || r.Message != "missing required labels: team, tier" {
				t.Fatalf("want denial naming both labels of an unlabelled pod, got %+v", r)
			}
			r = validate(t, p, podRequest(t, "default", map[string]string{"team": "a", "tier": "web"}, container("c", "nginx:1", false)))
			if !r.Accepted || r.MutatedObject != nil {
				t.Fatalf("want plain acceptance, got %+v", r)
			}
			_, err := e.Load(context.Background(), Spec{Name: "labels", Module: guest(t, g), Settings: json.RawMessage(`{"required":[]}`)})
			if err == nil || !strings.Contains(err.Error(), "settings rejected by the policy: settings.required must name at least one label") {
				t.Fatalf("want the policy's own settings message, got %v", err)
			}
		})
	}
}

func TestWaPC_MutatingVariant_AddsDefaultLabelAsPatch(t *testing.T) {
	e := newTestEngine(t, Options{})
	p := load(t, e, Spec{Module: guest(t, "wapc-labels"), Mutating: true,
		Settings: json.RawMessage(`{"required":["team"],"defaults":{"team":"platform"}}`)})
	req := podRequest(t, "default", map[string]string{"app": "x"}, container("c", "nginx:1", false))
	r := validate(t, p, req)
	if !r.Accepted || r.MutatedObject == nil {
		t.Fatalf("want acceptance with a mutated object, got %+v", r)
	}
	var parsed struct {
		Object json.RawMessage `json:"object"`
	}
	_ = json.Unmarshal(req, &parsed)
	patch, err := Patch(parsed.Object, r.MutatedObject)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"op":"add","path":"/metadata/labels/team","value":"platform"}`; !strings.Contains(string(patch), want) {
		t.Fatalf("patch %s lacks %s", patch, want)
	}
}

func TestWaPC_SettingsValidation(t *testing.T) {
	e := newTestEngine(t, Options{})
	_, err := e.Load(context.Background(), Spec{Name: "labels", Module: guest(t, "wapc-labels"), Settings: json.RawMessage(`{"required":[]}`)})
	if err == nil || !strings.Contains(err.Error(), "settings rejected by the policy: settings.required must name at least one label") {
		t.Fatalf("want the policy's own settings message, got %v", err)
	}
	_, err = e.Load(context.Background(), Spec{Name: "labels", Module: guest(t, "wapc-labels"), Settings: json.RawMessage(`{"required":["a"],"defaults":{"b":"x"}}`)})
	if err == nil || !strings.Contains(err.Error(), `default for "b"`) {
		t.Fatalf("want the policy's own settings message, got %v", err)
	}
}

func TestWASI_Privileged_DeniesPrivilegedPodsOutsideSkippedNamespaces(t *testing.T) {
	e := newTestEngine(t, Options{})
	p := load(t, e, Spec{Module: guest(t, "wasi-privileged"), ExecutionMode: ModeWASI,
		Settings: json.RawMessage(`{"skipNamespaces":["kube-system"]}`)})

	r := validate(t, p, podRequest(t, "default", nil, container("ok", "nginx:1", false), container("root", "nginx:1", true)))
	if r.Accepted || r.Message != `privileged container "root" is not allowed` {
		t.Fatalf("want denial naming the container, got %+v", r)
	}
	// Several in a row: each WASI run is one-shot, the pool replaces it.
	for range 3 {
		if r := validate(t, p, podRequest(t, "default", nil, container("ok", "nginx:1", false))); !r.Accepted {
			t.Fatalf("want acceptance, got %+v", r)
		}
	}
	if r := validate(t, p, podRequest(t, "kube-system", nil, container("root", "nginx:1", true))); !r.Accepted {
		t.Fatalf("skipped namespace: want acceptance, got %+v", r)
	}
}

func TestWASI_SettingsValidation(t *testing.T) {
	e := newTestEngine(t, Options{})
	_, err := e.Load(context.Background(), Spec{Name: "priv", Module: guest(t, "wasi-privileged"), ExecutionMode: ModeWASI,
		Settings: json.RawMessage(`{"skipNamespace":["x"]}`)})
	if err == nil || !strings.Contains(err.Error(), `settings rejected by the policy: unknown setting "skipNamespace"`) {
		t.Fatalf("want the policy's settings message, got %v", err)
	}
	_, err = e.Load(context.Background(), Spec{Name: "priv", Module: guest(t, "wasi-privileged"), ExecutionMode: ModeWASI,
		Settings: json.RawMessage(`{"skipNamespaces":"x"}`)})
	if err == nil || !strings.Contains(err.Error(), "skipNamespaces must be a list of strings") {
		t.Fatalf("want the policy's settings message, got %v", err)
	}
}

func TestOPA_DisallowLatest(t *testing.T) {
	e := newTestEngine(t, Options{})
	p := load(t, e, Spec{Module: regoModule(t, "disallow-latest.rego", "policy/main"), ExecutionMode: ModeOPA, Entrypoint: "policy/main"})

	r := validate(t, p, podRequest(t, "default", nil, container("a", "nginx:1.27", false), container("b", "busybox:latest", false), container("c", "redis", false)))
	want := "container b uses the :latest tag; container c has no tag, which means :latest"
	if r.Accepted || r.Message != want || r.Code != 403 {
		t.Fatalf("want denial %q, got %+v", want, r)
	}
	if r := validate(t, p, podRequest(t, "default", nil, container("a", "registry:5000/nginx:1.27", false))); !r.Accepted {
		t.Fatalf("want acceptance, got %+v", r)
	}
}

func TestOPA_UnknownEntrypointIsALoadError(t *testing.T) {
	e := newTestEngine(t, Options{})
	_, err := e.Load(context.Background(), Spec{Name: "x", Module: regoModule(t, "disallow-latest.rego", "policy/main"), ExecutionMode: ModeOPA, Entrypoint: "policy/nope"})
	if err == nil || !strings.Contains(err.Error(), `no entrypoint "policy/nope"`) {
		t.Fatalf("want an entrypoint error, got %v", err)
	}
}
