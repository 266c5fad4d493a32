package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"regent.dev/regent/policyserver/internal/guests"
)

// fuzzLabels are the labels of the pod the settings fuzz target evaluates.
var fuzzLabels = map[string]string{"team": "platform", "app": "web"}

// settingsFixture holds what FuzzPolicySettings loads once per process: compiling and building
// the guests costs seconds, evaluating microseconds.
type settingsFixture struct {
	engine     *Engine
	wapc       *Policy
	opa        []byte
	gatekeeper []byte
	gkEntry    string
	request    []byte
}

var (
	settingsOnce sync.Once
	settingsFix  settingsFixture
)

func loadSettingsFixture(t testing.TB) settingsFixture {
	settingsOnce.Do(func() {
		// The engine outlives the test that happened to build it: every input of the fuzz run
		// shares it, and the process ends with the run.
		dir, err := guests.CacheDir("wazero")
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(context.Background(), Options{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		wapc, err := e.Load(context.Background(), Spec{Name: "labels", Module: guest(t, "wapc-labels"),
			Settings: json.RawMessage(`{"required":["team"]}`)})
		if err != nil {
			t.Fatal(err)
		}
		src, err := os.ReadFile("testdata/required-labels-settings.rego")
		if err != nil {
			t.Fatal(err)
		}
		opa, err := CompileRego(context.Background(), map[string]string{"settings.rego": string(src)}, "settings/main", false)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := os.ReadFile("testdata/required-labels-template.yaml")
		if err != nil {
			t.Fatal(err)
		}
		ct, err := ParseConstraintTemplate(doc)
		if err != nil {
			t.Fatal(err)
		}
		gk, err := CompileRego(context.Background(), ct.Files, ct.Entrypoint, true)
		if err != nil {
			t.Fatal(err)
		}
		settingsFix = settingsFixture{engine: e, wapc: wapc, opa: opa, gatekeeper: gk, gkEntry: ct.Entrypoint,
			request: podRequest(t, "default", fuzzLabels, container("c", "nginx:1.27", false))}
	})
	if settingsFix.engine == nil {
		t.Fatal("the settings fixture failed to load in an earlier input")
	}
	return settingsFix
}

// FuzzPolicySettings hands arbitrary settings to each runtime and checks:
//   - settings that are not JSON (which is UTF-8) are refused at load with ErrInvalidSettings,
//     whatever the runtime, before any guest runs;
//   - waPC: the guest's validate_settings answer arrives intact: the host returns a well-formed
//     SettingsResponse (never an error) that agrees with the guest's own rules applied here;
//   - OPA (settings are data) and Gatekeeper (settings are input.parameters): any JSON settings
//     load (Rego has no settings hook) and every evaluation then answers, without error, what
//     the settings mean: a pod lacking a required label is denied, one with all of them admitted.
func FuzzPolicySettings(f *testing.F) {
	for _, seed := range []struct {
		runtime  uint8
		settings string
	}{
		{0, `{"required":["team"],"defaults":{"team":"platform"}}`},
		{0, `{"required":[],"defaults":{}}`},
		{0, `{"required":"team"}`},
		{0, `{"required":["a"],"defaults":{"b":"c"}}`},
		{1, `{"required":["team","app"]}`},
		{1, `{"required":["owner"]}`},
		{1, `{"required":{"x":"team","y":1}}`},
		{1, `[1,2]`},
		{2, `{"labels":["team"]}`},
		{2, `{"labels":["owner",null]}`},
		{2, `{"labels":"team"}`},
		{2, `{"labels":{"a":"app"}}`},
		{0, `{"required":`},
		{1, "\xff"},
		{2, `null`},
	} {
		f.Add(seed.runtime, []byte(seed.settings))
	}
	f.Fuzz(func(t *testing.T, runtime uint8, settings []byte) {
		fx := loadSettingsFixture(t)
		ctx := context.Background()
		runtime %= 3
		mode, module, entrypoint := ModeWaPC, guest(t, "wapc-labels"), ""
		switch runtime {
		case 1:
			mode, module, entrypoint = ModeOPA, fx.opa, "settings/main"
		case 2:
			mode, module, entrypoint = ModeGatekeeper, fx.gatekeeper, fx.gkEntry
		}
		spec := Spec{Name: "fuzz", Module: module, ExecutionMode: mode, Entrypoint: entrypoint, Settings: settings}
		if !json.Valid(spec.settings()) || !utf8.Valid(spec.settings()) {
			p, err := fx.engine.Load(ctx, spec)
			if err == nil {
				p.Close()
				t.Fatalf("%s: settings %q are not JSON, yet the policy loaded", mode, settings)
			}
			if !errors.Is(err, ErrInvalidSettings) {
				t.Fatalf("%s: settings %q are not JSON, yet the load error is not ErrInvalidSettings: %v", mode, settings, err)
			}
			return
		}
		if runtime == 0 {
			sr, err := fx.wapc.ValidateSettings(ctx, settings)
			if err != nil {
				t.Fatalf("validate_settings %q failed instead of answering: %v", settings, err)
			}
			if want := wapcLabelsAccepts(settings); sr.Valid != want {
				t.Fatalf("validate_settings %q: valid %v (%q), the guest's rules say %v", settings, sr.Valid, sr.Message, want)
			}
			if !sr.Valid && sr.Message == "" {
				t.Fatalf("validate_settings %q rejected the settings without saying why", settings)
			}
			return
		}
		p, err := fx.engine.Load(ctx, spec)
		if err != nil {
			t.Fatalf("%s: JSON settings %q did not load: %v", mode, settings, err)
		}
		defer p.Close()
		r, err := p.Validate(ctx, fx.request)
		if err != nil {
			t.Fatalf("%s: settings %q: evaluation failed: %v", mode, settings, err)
		}
		key := "required"
		if runtime == 2 {
			key = "labels"
			if !r.Accepted && (len(r.Violations) == 0 || r.Message != strings.Join(r.Violations, "; ")) {
				t.Fatalf("gatekeeper: a denial whose message is not its violations: %+v", r)
			}
		}
		if want, known := requiredLabelsAdmit(settings, key); known && r.Accepted != want {
			t.Fatalf("%s: settings %q: accepted %v (%q), the settings say %v", mode, settings, r.Accepted, r.Message, want)
		}
	})
}

// wapcLabelsAccepts applies the wapc-labels guest's settings rules (see its main.go) natively.
func wapcLabelsAccepts(settings []byte) bool {
	var s struct {
		Required []string          `json:"required"`
		Defaults map[string]string `json:"defaults"`
	}
	if err := json.Unmarshal(settings, &s); err != nil || len(s.Required) == 0 {
		return false
	}
	for k := range s.Defaults {
		if !slices.Contains(s.Required, k) {
			return false
		}
	}
	return true
}

// requiredLabelsAdmit says whether the fuzz pod passes the test policies configured with
// settings: every value under settings[key] (a list's items or an object's values) must be the
// name of one of its labels; anything else there names nothing Rego can iterate. known is false
// for documents whose meaning JSON parsers disagree on (duplicate keys, invalid UTF-8, \u escapes
// that may be lone surrogates), which kube-apiserver never stores.
func requiredLabelsAdmit(settings []byte, key string) (admit, known bool) {
	if !utf8.Valid(settings) || hasDuplicateKeys(settings) || bytes.Contains(settings, []byte(`\u`)) {
		return false, false
	}
	var doc any
	if err := json.Unmarshal(settings, &doc); err != nil {
		return false, false
	}
	m, _ := doc.(map[string]any)
	var values []any
	switch v := m[key].(type) {
	case []any:
		values = v
	case map[string]any:
		for _, x := range v {
			values = append(values, x)
		}
	}
	for _, v := range values {
		s, ok := v.(string)
		if _, present := fuzzLabels[s]; !ok || !present {
			return false, true
		}
	}
	return true, true
}

// hasDuplicateKeys reports whether any object in the JSON document names a key twice.
func hasDuplicateKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	var walk func() bool
	walk = func() bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return false
				}
				if seen[k.(string)] {
					return true
				}
				seen[k.(string)] = true
				if walk() {
					return true
				}
			}
			_, _ = dec.Token()
		case json.Delim('['):
			for dec.More() {
				if walk() {
					return true
				}
			}
			_, _ = dec.Token()
		}
		return false
	}
	dup := walk()
	_, err := dec.Token()
	return dup || (err != nil && err != io.EOF)
}
