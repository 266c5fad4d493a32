package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/engine"
	"regent.dev/regent/policyserver/localrun"
)

// gatorSuite is gator's Suite (test.gatekeeper.sh/v1alpha1) as far as evaluation goes.
type gatorSuite struct {
	Tests []gatorTest `json:"tests"`
}

type gatorTest struct {
	Name       string      `json:"name"`
	Template   string      `json:"template"`
	Constraint string      `json:"constraint"`
	Cases      []gatorCase `json:"cases"`
	Skip       bool        `json:"skip"`
}

type gatorCase struct {
	Name       string           `json:"name"`
	Object     string           `json:"object"`
	Inventory  []string         `json:"inventory"`
	Assertions []gatorAssertion `json:"assertions"`
	Skip       bool             `json:"skip"`
}

// gatorAssertion: violations is "yes", "no" or a count, of the violations whose message matches
// Message (a regular expression) when one is given.
type gatorAssertion struct {
	Violations json.RawMessage `json:"violations"`
	Message    *string         `json:"message"`
}

// InventoryCases counts the cases of a gator suite file that carry an inventory.
func InventoryCases(path string) (int, error) {
	var suite gatorSuite
	if err := readYAML(path, &suite); err != nil {
		return 0, err
	}
	n := 0
	for _, t := range suite.Tests {
		for _, c := range t.Cases {
			if len(c.Inventory) > 0 {
				n++
			}
		}
	}
	return n, nil
}

// runGator runs one gator suite file with e.
func runGator(ctx context.Context, e *engine.Engine, path string) ([]Case, error) {
	var suite gatorSuite
	if err := readYAML(path, &suite); err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	var out []Case
	for _, t := range suite.Tests {
		out = append(out, runGatorTest(ctx, e, dir, t)...)
	}
	return out, nil
}

func runGatorTest(ctx context.Context, e *engine.Engine, dir string, t gatorTest) []Case {
	cases := make([]Case, len(t.Cases))
	for i, c := range t.Cases {
		cases[i].Name = t.Name + "/" + c.Name
	}
	if t.Skip {
		return skipAll(cases, "the test is marked skip")
	}
	// One policy serves every case; each case sets the inventory to its own objects (gator
	// starts each case from an empty cache too), so no case sees another's.
	inventory := engine.NewInventory()
	p, err := loadGatorTest(ctx, e, dir, t, inventory)
	if err != nil {
		return failAll(cases, err.Error())
	}
	defer p.Close()
	for i, c := range t.Cases {
		if c.Skip {
			cases[i].Skipped = "the case is marked skip"
			continue
		}
		if err := loadGatorInventory(inventory, dir, c.Inventory); err != nil {
			cases[i].Failure = err.Error()
			continue
		}
		if err := runGatorCase(ctx, p, dir, c); err != nil {
			cases[i].Failure = err.Error()
		}
	}
	return cases
}

// loadGatorInventory makes the objects of a case's inventory files (each may hold several
// YAML documents) the inventory.
func loadGatorInventory(inventory *engine.Inventory, dir string, files []string) error {
	var objs [][]byte
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return fmt.Errorf("read inventory: %w", err)
		}
		docs, err := yamlDocuments(b)
		if err != nil {
			return fmt.Errorf("inventory %s: %w", f, err)
		}
		objs = append(objs, docs...)
	}
	if err := inventory.Replace(objs); err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	return nil
}

// yamlDocuments returns the JSON of each non-empty document of a YAML stream.
func yamlDocuments(b []byte) ([][]byte, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out [][]byte
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(doc) == 0 {
			continue
		}
		j, err := json.Marshal(doc)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
}

// loadGatorTest loads a test's template with its constraint's parameters, through the policy
// server's own loader.
func loadGatorTest(ctx context.Context, e *engine.Engine, dir string, t gatorTest, inventory *engine.Inventory) (*engine.Policy, error) {
	if t.Template == "" || t.Constraint == "" {
		return nil, fmt.Errorf("test %s names no template or no constraint", t.Name)
	}
	doc, err := os.ReadFile(filepath.Join(dir, t.Constraint))
	if err != nil {
		return nil, fmt.Errorf("read constraint: %w", err)
	}
	params, err := localrun.Settings(doc)
	if err != nil {
		return nil, fmt.Errorf("constraint %s: %w", t.Constraint, err)
	}
	pc := policyserver.PolicyConfig{Module: filepath.Join(dir, t.Template), ExecutionMode: string(engine.ModeGatekeeper), Settings: params}
	spec, err := pc.EngineSpec(ctx, t.Name)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", t.Template, err)
	}
	spec.Inventory = inventory
	p, err := e.Load(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("load template %s: %w", t.Template, err)
	}
	return p, nil
}

func runGatorCase(ctx context.Context, p *engine.Policy, dir string, c gatorCase) error {
	doc, err := os.ReadFile(filepath.Join(dir, c.Object))
	if err != nil {
		return fmt.Errorf("read object: %w", err)
	}
	req, err := localrun.Request(doc)
	if err != nil {
		return fmt.Errorf("object %s: %w", c.Object, err)
	}
	r, err := p.Validate(ctx, req)
	if err != nil {
		return fmt.Errorf("evaluate: %w", err)
	}
	if r.Accepted != (len(r.Violations) == 0) {
		return fmt.Errorf("accepted=%v with %d violations", r.Accepted, len(r.Violations))
	}
	var failures []string
	for _, a := range c.Assertions {
		if err := checkGatorAssertion(a, r.Violations); err != nil {
			failures = append(failures, err.Error())
		}
	}
	if len(failures) > 0 {
		return fmt.Errorf("%s", strings.Join(failures, "; "))
	}
	return nil
}

func checkGatorAssertion(a gatorAssertion, violations []string) error {
	var re *regexp.Regexp
	what := "violations"
	if a.Message != nil {
		var err error
		if re, err = regexp.Compile(*a.Message); err != nil {
			return fmt.Errorf("assertion message %q: %w", *a.Message, err)
		}
		what = fmt.Sprintf("violations matching %q", *a.Message)
	}
	matching := 0
	for _, v := range violations {
		if re == nil || re.MatchString(v) {
			matching++
		}
	}
	// YAML 1.1 reads an unquoted yes/no as a boolean, which is how suites write them.
	var want any = "yes" // gator's default: at least one
	if len(a.Violations) > 0 {
		if err := json.Unmarshal(a.Violations, &want); err != nil {
			return fmt.Errorf("assertion violations %s: %w", a.Violations, err)
		}
	}
	switch want {
	case "yes", true:
		if matching == 0 {
			return fmt.Errorf("want %s, got none: %q", what, violations)
		}
		return nil
	case "no", false:
		if matching > 0 {
			return fmt.Errorf("want no %s, got %d: %q", what, matching, violations)
		}
		return nil
	}
	n, ok := want.(float64)
	if !ok || n != float64(int(n)) || n < 0 {
		return fmt.Errorf("assertion violations %s is neither yes, no nor a count", a.Violations)
	}
	if int(n) != matching {
		return fmt.Errorf("want %d %s, got %d: %q", int(n), what, matching, violations)
	}
	return nil
}

func readYAML(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func skipAll(cases []Case, why string) []Case {
	for i := range cases {
		cases[i].Skipped = why
	}
	return cases
}

func failAll(cases []Case, why string) []Case {
	if len(cases) == 0 {
		return []Case{{Name: "(no cases)", Failure: why}}
	}
	for i := range cases {
		cases[i].Failure = why
	}
	return cases
}
