package engine

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"sigs.k8s.io/yaml"
)

// FuzzParseConstraintTemplate parses arbitrary documents as ConstraintTemplates and checks:
//   - a parsed template has its Rego as template.rego and an entrypoint "<package>/violation";
//   - when OPA itself parses that Rego (v0 or v1), the entrypoint is OPA's package path, so the
//     compile that follows looks for the rule where OPA puts it;
//   - parsing is stable: the template written back as a canonical ConstraintTemplate parses to
//     the same result.
func FuzzParseConstraintTemplate(f *testing.F) {
	if doc, err := os.ReadFile("testdata/required-labels-template.yaml"); err == nil {
		f.Add(doc)
	}
	for _, seed := range []string{
		"apiVersion: templates.gatekeeper.sh/v1beta1\nkind: ConstraintTemplate\nspec:\n  crd: {spec: {names: {kind: K}}}\n  targets:\n  - target: admission.k8s.gatekeeper.sh\n    code:\n    - engine: K8sNativeValidation\n      source: {}\n    - engine: Rego\n      source:\n        rego: \"package a.b\\nviolation[{\\\"msg\\\": \\\"x\\\"}] { true }\"\n        libs: [\"package lib.x\\nf := 1\"]\n",
		`{"apiVersion":"templates.gatekeeper.sh/v1","kind":"ConstraintTemplate","spec":{"targets":[{"rego":"# c\npackage p # the package\nviolation contains {\"msg\": \"m\"} if true"}]}}`,
		"apiVersion: templates.gatekeeper.sh/v1\nkind: ConstraintTemplate\nspec:\n  targets: [{rego: 'package a[\"b\"]'}]\n",
		"apiVersion: templates.gatekeeper.sh/v1\nkind: ConstraintTemplate\nspec:\n  targets: []\n",
		"apiVersion: v1\nkind: ConfigMap\n",
		"a: &a [*a]\n",
		"- [",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		ct, err := ParseConstraintTemplate(doc)
		if err != nil {
			return
		}
		rego := ct.Files["template.rego"]
		if rego == "" || !strings.HasSuffix(ct.Entrypoint, "/violation") {
			t.Fatalf("parsed template without Rego or entrypoint: %+v", ct)
		}
		for _, v := range []ast.RegoVersion{ast.RegoV0, ast.RegoV1} {
			m, err := ast.ParseModuleWithOpts("template.rego", rego, ast.ParserOptions{RegoVersion: v})
			if err != nil || m == nil {
				continue
			}
			if want := opaEntrypoint(m.Package) + "/violation"; ct.Entrypoint != want {
				t.Fatalf("entrypoint %q, but OPA (%v) reads the package as %q", ct.Entrypoint, v, want)
			}
		}

		libs := make([]string, len(ct.Files)-1)
		for i := range libs {
			lib, ok := ct.Files[fmt.Sprintf("lib%d.rego", i)]
			if !ok {
				t.Fatalf("files are not template.rego and lib0..lib%d: %v", len(libs)-1, ct.Files)
			}
			libs[i] = lib
		}
		canonical := map[string]any{
			"apiVersion": "templates.gatekeeper.sh/v1", "kind": "ConstraintTemplate",
			"spec": map[string]any{
				"crd":     map[string]any{"spec": map[string]any{"names": map[string]any{"kind": ct.Kind}}},
				"targets": []any{map[string]any{"target": "admission.k8s.gatekeeper.sh", "rego": rego, "libs": libs}},
			},
		}
		out, err := yaml.Marshal(canonical)
		if err != nil {
			t.Fatalf("write the template back: %v", err)
		}
		again, err := ParseConstraintTemplate(out)
		if err != nil {
			t.Fatalf("the template written back does not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(again, ct) {
			t.Fatalf("parse is not stable:\nfirst  %+v\nsecond %+v", ct, again)
		}
	})
}

// opaEntrypoint is a package's path as an entrypoint names it: "data.a.b" is "a/b".
func opaEntrypoint(p *ast.Package) string {
	parts := make([]string, 0, len(p.Path))
	for _, term := range p.Path[1:] {
		if s, ok := term.Value.(ast.String); ok {
			parts = append(parts, string(s))
			continue
		}
		parts = append(parts, term.String())
	}
	return strings.Join(parts, "/")
}
