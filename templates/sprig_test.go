package templates

import (
	"context"
	"strings"
	"testing"

	sprig "github.com/Masterminds/sprig/v3"
)

// resolve runs a managed-cluster template with no objects to read.
func resolve(t *testing.T, text string) (string, error) {
	t.Helper()
	return ResolveText(context.Background(), text, Config{Reader: objects{}})
}

func TestSprigFunctions_AsOCMOffersThemByGroup(t *testing.T) {
	cases := []struct{ group, in, want string }{
		{"strings", `{{ "  Hello World  " | trim | lower | replace " " "-" }}`, "hello-world"},
		{"strings", `{{ "abcdef" | trunc 3 }}-{{ "ab" | repeat 2 }}-{{ "x" | quote }}-{{ "x" | squote }}`, `abc-abab-"x"-'x'`},
		{"strings", `{{ "hello" | title }}{{ "a,b" | contains "," }}{{ "prefix-x" | trimPrefix "prefix-" }}`, "Hellotruex"},
		{"strings", `{{ nospace "a b c" }}-{{ "FooBar" | snakecase }}-{{ "foo_bar" | camelcase }}`, "abc-foo_bar-FooBar"},
		{"string lists", `{{ splitList "," "b,a,c" | sortAlpha | join "/" }}`, "a/b/c"},
		{"string lists", `{{ $p := split "." "x.y" }}{{ $p._1 }}`, "y"},
		{"regex", `{{ regexMatch "^v[0-9]+$" "v12" }}-{{ regexFind "[0-9]+" "ab123c" }}-{{ regexReplaceAll "[aeiou]" "policy" "_" }}`, "true-123-p_l_cy"},
		{"integers", `{{ add 1 2 3 }}-{{ sub 10 4 }}-{{ mul 2 3 }}-{{ div 7 2 }}-{{ mod 7 2 }}-{{ max 3 9 4 }}-{{ min 3 9 4 }}`, "6-6-6-3-1-9-3"},
		{"integers", `{{ until 3 | join "," }}-{{ seq 1 3 }}`, "0,1,2-1 2 3"},
		{"floats", `{{ addf 1.5 2 }}-{{ round 3.456 2 }}`, "3.5-3.46"},
		{"conversions", `{{ atoi "42" }}-{{ int64 "7" }}-{{ toString 5 }}-{{ toStrings (list 1 2) | join "+" }}`, "42-7-5-1+2"},
		{"defaults", `{{ "" | default "fallback" }}-{{ empty "" }}-{{ coalesce "" "first" "second" }}-{{ ternary "yes" "no" true }}`, "fallback-true-first-yes"},
		{"lists", `{{ list 3 1 2 | first }}-{{ list 3 1 2 | last }}-{{ list 1 2 2 3 | uniq | len }}-{{ has 2 (list 1 2) }}-{{ list 1 2 3 | rest | join "," }}`, "3-2-3-true-2,3"},
		{"dicts", `{{ $d := dict "b" 2 "a" 1 }}{{ keys $d | sortAlpha | join "," }}-{{ get $d "a" }}-{{ hasKey $d "c" }}-{{ $d = set $d "c" 3 }}{{ len $d }}`, "a,b-1-false-3"},
		{"dicts", `{{ (merge (dict "a" 1) (dict "a" 2 "b" 3)).b }}-{{ pick (dict "a" 1 "b" 2) "a" | values | first }}`, "3-1"},
		{"encoding", `{{ "hi" | b64enc }}-{{ "aGk=" | b64dec }}-{{ "hi" | sha256sum | trunc 8 }}`, "aGk=-hi-8f434346"},
		{"json", `{{ (fromJson "{\"a\":[1,2]}").a | toJson }}-{{ (fromJSON "{\"b\":true}").b }}-{{ dict "k" "v" | toJSON }}`, `[1,2]-true-{"k":"v"}`},
		{"yaml", `{{ (fromYaml "a:\n  b: c").a.b }}|{{ dict "k" (list 1 2) | toYAML }}`, "c|k:\n  - 1\n  - 2"},
		{"semver", `{{ semverCompare ">=1.28.0" "1.30.2" }}-{{ (semver "1.30.2").Minor }}`, "true-30"},
		{"flow", `{{ if and (eq 1 1) (ne "a" "b") }}ok{{ end }}`, "ok"},
	}
	for _, tc := range cases {
		t.Run(tc.group+"/"+tc.in, func(t *testing.T) {
			got, err := resolve(t, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSprigFunctions_EveryOneButTheEnvironmentIsOffered(t *testing.T) {
	m := (&funcs{}).funcMap()
	for name := range sprig.TxtFuncMap() {
		if _, ok := m[name]; !ok {
			t.Errorf("sprig's %s is not offered", name)
		}
	}
	for _, text := range []string{`{{ env "HOME" }}`, `{{ expandenv "$HOME" }}`} {
		_, err := resolve(t, text)
		if err == nil || !strings.Contains(err.Error(), "security risk") {
			t.Errorf("%s: err = %v, want a refusal saying it is a security risk", text, err)
		}
	}
	// The same in hub templates.
	if _, err := ResolveText(context.Background(), `{{hub env "HOME" hub}}`, Config{Hub: true, Namespace: "root", Reader: objects{}}); err == nil {
		t.Error("a hub template read the hub's environment")
	}
}

func TestOCMFunctions_TakePrecedenceOverSprigsOfTheSameName(t *testing.T) {
	cases := []struct{ in, want, wantErr string }{
		// sprig's b64dec answers a bad input with the error's text as the value; a policy must not
		// apply that, so it is an error.
		{in: `{{ "%%%" | b64dec }}`, wantErr: "base64dec"},
		{in: `{{ "%%%" | base64dec }}`, wantErr: "base64dec"},
		// OCM's atoi: not a number is 0, as in sprig.
		{in: `{{ atoi "12" }}-{{ atoi "x" }}`, want: "12-0"},
		// OCM's indent pads the lines after the first (the action sits where the first goes).
		{in: "{{ \"a\\nb\" | indent 2 }}", want: "a\n  b"},
		{in: `{{ "7" | toInt }}-{{ "true" | toBool }}`, want: "7-true"},
	}
	for _, tc := range cases {
		got, err := resolve(t, tc.in)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: got %q, %v; want an error naming %s", tc.in, got, err, tc.wantErr)
			}
		case err != nil || got != tc.want:
			t.Errorf("%s: got %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// A hub template resolving differently on every propagation would rewrite its replicas without
// end (each write propagates the root again): the functions whose result changes by itself are
// refused there, and only there.
func TestSprigFunctions_UnrepeatableOnesAreRefusedInHubTemplatesOnly(t *testing.T) {
	hub := Config{Hub: true, Namespace: "root", Reader: objects{}}
	for _, text := range []string{`{{hub now hub}}`, `{{hub uuidv4 hub}}`, `{{hub randAlphaNum 8 hub}}`, `{{hub genPrivateKey "rsa" hub}}`} {
		if _, err := ResolveText(context.Background(), text, hub); err == nil || !strings.Contains(err.Error(), "not allowed in hub templates") {
			t.Errorf("%s: err = %v, want a refusal saying why", text, err)
		}
	}
	for _, text := range []string{`{{ now | date "2006" }}`, `{{ uuidv4 | len }}`, `{{ randAlphaNum 8 | len }}`} {
		if got, err := resolve(t, text); err != nil || got == "" {
			t.Errorf("%s in a managed-cluster template: %q, %v", text, got, err)
		}
	}
	// Deterministic time functions stay: formatting a given time is repeatable.
	if got, err := ResolveText(context.Background(), `{{hub toDate "2006-01-02" "2024-05-06" | date "Jan 2006" hub}}`, hub); err != nil || got != "May 2024" {
		t.Errorf("date of a given time in a hub template: %q, %v", got, err)
	}
}
