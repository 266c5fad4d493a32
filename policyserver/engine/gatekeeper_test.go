package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"regent.dev/regent/test/corpora"
)

// gatorSuite is the part of Gatekeeper's gator Suite format the library's tests use.
type gatorSuite struct {
	Tests []struct {
		Name       string `json:"name"`
		Template   string `json:"template"`
		Constraint string `json:"constraint"`
		Cases      []struct {
			Name       string `json:"name"`
			Object     string `json:"object"`
			Assertions []struct {
				Violations any    `json:"violations"`
				Message    string `json:"message"`
			} `json:"assertions"`
		} `json:"cases"`
	} `json:"tests"`
}

// TestGatekeeper_OwnSuites runs Regent's own gator suites (policyserver/testdata/gatekeeper).
func TestGatekeeper_OwnSuites(t *testing.T) {
	suites, err := filepath.Glob(filepath.Join("..", "testdata", "gatekeeper", "*", "suite.yaml"))
	if err != nil || len(suites) < 2 {
		t.Fatalf("found %d suites under ../testdata/gatekeeper (err %v)", len(suites), err)
	}
	runGatorSuites(t, suites)
}

// TestGatekeeper_LibrarySuites runs every case of every suite.yaml in the gatekeeper-library
// corpus and expects the violations gator expects.
func TestGatekeeper_LibrarySuites(t *testing.T) {
	library := corpora.Dir(t, "gatekeeper-library")
	suites, err := filepath.Glob(filepath.Join(library, "library", "*", "*", "suite.yaml"))
	if err != nil || len(suites) == 0 {
		t.Fatalf("no suites under %s (err %v)", library, err)
	}
	runGatorSuites(t, suites)
}

// runGatorSuites runs the cases of gator suite files, each against its template and constraint.
func runGatorSuites(t *testing.T, suites []string) {
	e := newTestEngine(t, Options{})
	for _, suitePath := range suites {
		dir := filepath.Dir(suitePath)
		var suite gatorSuite
		readYAML(t, suitePath, &suite)
		for _, st := range suite.Tests {
			t.Run(filepath.Base(dir)+"/"+st.Name, func(t *testing.T) {
				tmpl, err := os.ReadFile(filepath.Join(dir, st.Template))
				if err != nil {
					t.Fatal(err)
				}
				ct, err := ParseConstraintTemplate(tmpl)
				if err != nil {
					t.Fatal(err)
				}
				wasm, err := CompileRego(context.Background(), ct.Files, ct.Entrypoint, true)
				if err != nil {
					t.Fatal(err)
				}
				var constraint struct {
					Spec struct {
						Parameters json.RawMessage `json:"parameters"`
					} `json:"spec"`
				}
				readYAML(t, filepath.Join(dir, st.Constraint), &constraint)
				p := load(t, e, Spec{Name: ct.Kind, Module: wasm, ExecutionMode: ModeGatekeeper,
					Entrypoint: ct.Entrypoint, Settings: constraint.Spec.Parameters})
				for _, c := range st.Cases {
					r := validate(t, p, gatorReview(t, filepath.Join(dir, c.Object)))
					for _, a := range c.Assertions {
						checkAssertion(t, c.Name, r, a.Violations, a.Message)
					}
				}
			})
		}
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// gatorReview builds the review gator would: an AdmissionReview object gives its request, any
// other object is reviewed as being created.
func gatorReview(t *testing.T, path string) []byte {
	t.Helper()
	var obj map[string]any
	readYAML(t, path, &obj)
	if obj["kind"] == "AdmissionReview" {
		b, _ := json.Marshal(obj["request"])
		return b
	}
	apiVersion, _ := obj["apiVersion"].(string)
	group, version, found := strings.Cut(apiVersion, "/")
	if !found {
		group, version = "", apiVersion
	}
	meta, _ := obj["metadata"].(map[string]any)
	b, _ := json.Marshal(map[string]any{
		"kind":      map[string]any{"group": group, "version": version, "kind": obj["kind"]},
		"operation": "CREATE",
		"name":      meta["name"],
		"namespace": meta["namespace"],
		"object":    obj,
	})
	return b
}

// checkAssertion applies one gator assertion: violations is yes/no or a count, of the
// violations whose message matches message (a regular expression) when given.
func checkAssertion(t *testing.T, name string, r Response, violations any, message string) {
	t.Helper()
	matching := 0
	for _, v := range r.Violations {
		if message == "" || regexp.MustCompile(message).MatchString(v) {
			matching++
		}
	}
	switch want := violations.(type) {
	case string:
		if (want == "yes") != (matching > 0) {
			t.Errorf("%s: violations %q, got %d matching %q: %v", name, want, matching, message, r.Violations)
		}
	case bool:
		if want != (matching > 0) {
			t.Errorf("%s: violations %v, got %d matching %q: %v", name, want, matching, message, r.Violations)
		}
	case float64:
		if int(want) != matching {
			t.Errorf("%s: want %s violations matching %q, got %d: %v", name, strconv.Itoa(int(want)), message, matching, r.Violations)
		}
	default:
		if violations != nil {
			t.Fatalf("%s: unsupported assertion %v", name, violations)
		}
	}
	if r.Accepted != (len(r.Violations) == 0) {
		t.Errorf("%s: accepted=%v with %d violations", name, r.Accepted, len(r.Violations))
	}
}

// A package path may be written as a ref (package lib["x-y"]): the entrypoint must be where OPA
// puts the rules, or the template never compiles.
func TestGatekeeper_PackageWrittenAsRef_CompilesAtOPAsPath(t *testing.T) {
	doc := "apiVersion: templates.gatekeeper.sh/v1\nkind: ConstraintTemplate\nspec:\n  targets:\n  - rego: |\n      package k8s[\"required-labels\"] # a ref\n      violation[{\"msg\": \"m\"}] { input.review.object.kind == \"Pod\" }\n"
	ct, err := ParseConstraintTemplate([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if ct.Entrypoint != "k8s/required-labels/violation" {
		t.Errorf("entrypoint %q", ct.Entrypoint)
	}
	if _, err := CompileRego(context.Background(), ct.Files, ct.Entrypoint, true); err != nil {
		t.Fatal(err)
	}
}
