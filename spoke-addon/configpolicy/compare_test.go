package configpolicy

import (
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

func parse(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return v
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		name               string
		template, existing string
		mustHave, onlyHave bool
	}{
		{"a subset map matches with musthave but not mustonlyhave", `{a: 1}`, `{a: 1, b: 2}`, true, false},
		{"an equal map matches both", `{a: 1, b: {c: x}}`, `{b: {c: x}, a: 1}`, true, true},
		{"a different value matches neither", `{a: 1}`, `{a: 2}`, false, false},
		{"a missing key matches neither", `{a: 1}`, `{b: 1}`, false, false},
		{"an empty template value matches a missing field", `{a: {}, b: [], c: ""}`, `{d: 1}`, true, false},
		{"an extra empty existing field does not break mustonlyhave", `{a: 1}`, `{a: 1, b: {}}`, true, true},
		{"nested extra keys break mustonlyhave only", `{spec: {x: 1}}`, `{spec: {x: 1, y: 2}}`, true, false},
		{"a list item that is a subset of an existing item is found", `[{name: a}]`, `[{name: b}, {name: a, image: x}]`, true, false},
		{"a list item with no existing counterpart is missing", `[{name: c}]`, `[{name: a}, {name: b}]`, false, false},
		{"mustonlyhave lists match in any order", `[b, a]`, `[a, b]`, true, true},
		{"mustonlyhave lists need the same length", `[a]`, `[a, b]`, true, false},
		{"mustonlyhave list items must match exactly", `[{name: a}]`, `[{name: a, image: x}]`, true, false},
		{"mustonlyhave duplicates are counted", `[a, a]`, `[a, b]`, true, false},
		{"numbers compare by value", `{r: 2}`, `{r: 2.0}`, true, true},
		{"a number equals its string form", `{port: "80"}`, `{port: 80}`, true, true},
		{"quantities compare by amount", `{memory: 1Gi}`, `{memory: 1024Mi}`, true, true},
		{"different quantities differ", `{memory: 512Mi}`, `{memory: 256Mi}`, false, false},
		{"a map does not match a scalar", `{a: {b: 1}}`, `{a: 1}`, false, false},
		{"a list does not match a map", `{a: [1]}`, `{a: {b: 1}}`, false, false},
		{"booleans compare exactly", `{a: true}`, `{a: false}`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, existing := parse(t, tc.template), parse(t, tc.existing)
			if got := matches(tmpl, existing, false); got != tc.mustHave {
				t.Errorf("musthave: matches = %v, want %v", got, tc.mustHave)
			}
			if got := matches(tmpl, existing, true); got != tc.onlyHave {
				t.Errorf("mustonlyhave: matches = %v, want %v", got, tc.onlyHave)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		template, existing         string
		mustHaveWant, onlyHaveWant string
	}{
		{"musthave keeps existing keys, mustonlyhave drops them",
			`{a: 1}`, `{a: 2, b: 3}`, `{a: 1, b: 3}`, `{a: 1}`},
		{"maps merge recursively",
			`{spec: {x: 1}}`, `{spec: {x: 0, y: 2}}`, `{spec: {x: 1, y: 2}}`, `{spec: {x: 1}}`},
		{"a missing list item is appended with musthave and replaces the list with mustonlyhave",
			`[{name: c}]`, `[{name: a}, {name: b}]`, `[{name: a}, {name: b}, {name: c}]`, `[{name: c}]`},
		{"a found list item is kept in place",
			`[{name: b}]`, `[{name: a}, {name: b, x: 1}]`, `[{name: a}, {name: b, x: 1}]`, `[{name: b}]`},
		{"a template over nothing is the template",
			`{a: [1]}`, `null`, `{a: [1]}`, `{a: [1]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, existing := parse(t, tc.template), parse(t, tc.existing)
			before := deepCopy(existing)
			if got, want := merge(tmpl, existing, false), parse(t, tc.mustHaveWant); !reflect.DeepEqual(got, want) {
				t.Errorf("musthave: merge = %v, want %v", got, want)
			}
			if got, want := merge(tmpl, existing, true), parse(t, tc.onlyHaveWant); !reflect.DeepEqual(got, want) {
				t.Errorf("mustonlyhave: merge = %v, want %v", got, want)
			}
			if !reflect.DeepEqual(before, existing) {
				t.Errorf("merge changed its input: %v, was %v", existing, before)
			}
			if merged := merge(tmpl, existing, false); !matches(tmpl, merged, false) {
				t.Errorf("musthave: the merged value %v does not match the template", merged)
			}
		})
	}
}

func TestCompareObject(t *testing.T) {
	existing := parse(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: d, uid: "123", labels: {a: "1", b: "2"}}
data: {k: v}
status: {phase: Running}`).(map[string]any)
	for _, tc := range []struct {
		name               string
		template           string
		onlyHave, metaOnly bool
		want               bool
		wantDesired        string // a path.value the desired object must carry, empty to skip
	}{
		{"identity and server fields are not compared", `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}`, true, true, true, ""},
		{"a label subset matches musthave metadata", `{metadata: {labels: {a: "1"}}}`, false, false, true, ""},
		{"a label subset fails mustonlyhave metadata", `{metadata: {labels: {a: "1"}}}`, false, true, false, ""},
		{"a wrong data value fails", `{data: {k: w}}`, false, false, false, "w"},
		{"status is compared", `{status: {phase: Pending}}`, false, false, false, ""},
		{"a matching status complies", `{status: {phase: Running}}`, false, false, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, desired := compareObject(parse(t, tc.template).(map[string]any), existing, tc.onlyHave, tc.metaOnly)
			if ok != tc.want {
				t.Errorf("compareObject = %v, want %v", ok, tc.want)
			}
			if desired["status"].(map[string]any)["phase"] != "Running" {
				t.Errorf("desired status changed: %v", desired["status"])
			}
			if tc.wantDesired != "" && desired["data"].(map[string]any)["k"] != tc.wantDesired {
				t.Errorf("desired data = %v, want k=%s", desired["data"], tc.wantDesired)
			}
		})
	}
}
