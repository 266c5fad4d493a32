package templates

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"regent.dev/regent/test/corpora"
)

// fixtureCluster is a Reader over the objects of a YAML file, with label selectors: the subject is
// what the templates do with what they read, not the reads (the controllers test those against
// a real apiserver).
type fixtureCluster []unstructured.Unstructured

func (c fixtureCluster) Get(_ context.Context, apiVersion, kind, namespace, name string) (*unstructured.Unstructured, error) {
	for i := range c {
		o := &c[i]
		if o.GetAPIVersion() == apiVersion && o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o.DeepCopy(), nil
		}
	}
	return nil, nil
}

func (c fixtureCluster) List(_ context.Context, apiVersion, kind, namespace, selector string) ([]unstructured.Unstructured, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, err
	}
	var out []unstructured.Unstructured
	for _, o := range c {
		if o.GetAPIVersion() == apiVersion && o.GetKind() == kind && (namespace == "" || o.GetNamespace() == namespace) &&
			sel.Matches(labels.Set(o.GetLabels())) {
			out = append(out, *o.DeepCopy())
		}
	}
	return out, nil
}

func readDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		doc := map[string]any{}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return docs
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(doc) > 0 {
			docs = append(docs, doc)
		}
	}
}

// resolveConfigurationPolicy does to a policy template what Regent does end to end: the hub
// resolves its hub templates for cluster1 in the root's namespace, then the managed cluster its
// own templates, object-templates-raw included. It returns the object templates to apply.
func resolveConfigurationPolicy(t *testing.T, cluster Reader, def map[string]any) []any {
	t.Helper()
	ctx := context.Background()
	raw, err := json.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	if HasTemplates(raw, true) {
		raw, err = ResolveJSON(ctx, raw, Config{Hub: true, Namespace: "policies", Reader: cluster,
			ClusterScopedAllowList: []ClusterScopedObject{{Group: "cluster.open-cluster-management.io", Kind: "ManagedCluster", Name: "cluster1"}},
			Data:                   map[string]any{"ManagedClusterName": "cluster1", "ManagedClusterLabels": map[string]string{}}})
		if err != nil {
			t.Fatalf("hub templates: %v", err)
		}
	}
	var cp struct {
		Spec struct {
			ObjectTemplates    []map[string]any `json:"object-templates"`
			ObjectTemplatesRaw string           `json:"object-templates-raw"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &cp); err != nil {
		t.Fatal(err)
	}
	if cp.Spec.ObjectTemplatesRaw != "" {
		text, err := ResolveText(ctx, cp.Spec.ObjectTemplatesRaw, Config{Reader: cluster})
		if err != nil {
			t.Fatalf("object-templates-raw: %v", err)
		}
		var out []any
		if err := yaml.Unmarshal([]byte(text), &out); err != nil {
			t.Fatalf("object-templates-raw resolved to no list of object templates: %v\n%s", err, text)
		}
		return out
	}
	out := make([]any, 0, len(cp.Spec.ObjectTemplates))
	for i, ot := range cp.Spec.ObjectTemplates {
		def, err := json.Marshal(ot["objectDefinition"])
		if err != nil {
			t.Fatal(err)
		}
		resolved, err := ResolveJSON(ctx, def, Config{Reader: cluster})
		if err != nil {
			t.Fatalf("object-templates[%d]: %v", i, err)
		}
		var obj any
		if err := json.Unmarshal(resolved, &obj); err != nil {
			t.Fatal(err)
		}
		ot["objectDefinition"] = obj
		out = append(out, map[string]any(ot))
	}
	return out
}

// TestCollectionFixtures_ResolveAsOnOCM resolves the policy-collection-like Policies of
// testdata/collection (node-role functions, atoi, sprig's string, list, regex, semver and YAML
// functions, in hub and managed-cluster templates) against the objects of cluster.yaml, and
// compares each with the object templates its .want.yaml says OCM applies.
func TestCollectionFixtures_ResolveAsOnOCM(t *testing.T) {
	var cluster fixtureCluster
	for _, doc := range readDocs(t, "testdata/collection/cluster.yaml") {
		cluster = append(cluster, unstructured.Unstructured{Object: doc})
	}
	policies, err := filepath.Glob("testdata/collection/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, path := range policies {
		if strings.HasSuffix(path, ".want.yaml") || filepath.Base(path) == "cluster.yaml" {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			policy := readDocs(t, path)[0]
			tmpls, _, _ := unstructured.NestedSlice(policy, "spec", "policy-templates")
			if len(tmpls) != 1 {
				t.Fatalf("a fixture holds one policy template, this one %d", len(tmpls))
			}
			def, _, _ := unstructured.NestedMap(tmpls[0].(map[string]any), "objectDefinition")
			got := resolveConfigurationPolicy(t, cluster, def)
			wantYAML, err := os.ReadFile(strings.TrimSuffix(path, ".yaml") + ".want.yaml")
			if err != nil {
				t.Fatal(err)
			}
			var want []any
			if err := yaml.Unmarshal(wantYAML, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(normalized(t, got), normalized(t, want)) {
				g, _ := yaml.Marshal(got)
				t.Errorf("resolved to\n%s\nwant\n%s", g, wantYAML)
			}
		})
		ran++
	}
	if ran == 0 {
		t.Fatal("no fixture found")
	}
}

// normalized gives v the shape JSON decoding does (numbers as float64), so values compare.
func normalized(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// hubActions finds the hub templates of a text.
var hubActions = regexp.MustCompile(`(?s)\{\{hub.*?hub\}\}`)

// TestPolicyCollection_EveryTemplateParsesWithOCMsFunctions parses every hub and managed-cluster
// template of OCM's policy-collection (REGENT_CORPORA) with Regent's function set: a function OCM
// offers and Regent lacks fails the parse, which is what this looks for.
func TestPolicyCollection_EveryTemplateParsesWithOCMsFunctions(t *testing.T) {
	dir := corpora.Dir(t, "policy-collection")
	fm := (&funcs{}).funcMap()
	checked := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(data)
		for _, delims := range [][2]string{{HubStart, HubStop}, {SpokeStart, SpokeStop}} {
			if !strings.Contains(text, delims[0]) {
				continue
			}
			checked++
			// Hub actions are plain text to the managed-cluster delimiters only once resolved:
			// parse each kind with the other's actions out of the way.
			src := text
			if delims[0] == SpokeStart {
				src = hubActions.ReplaceAllString(src, "")
			}
			if _, err := template.New(path).Delims(delims[0], delims[1]).Funcs(fm).Parse(expandAutoindent(src, delims[0])); err != nil &&
				strings.Contains(err.Error(), "not defined") {
				t.Errorf("%s: %v", path, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("policy-collection: %d templated files parsed", checked)
}

func TestNodeRoleFunctions_NeedARoleAndOnHubsAServiceAccount(t *testing.T) {
	ctx := context.Background()
	for _, text := range []string{`{{ getNodesWithExactRoles }}`, `{{ hasNodesWithExactRoles " " }}`} {
		if _, err := ResolveText(ctx, text, Config{Reader: fixtureCluster{}}); err == nil || !strings.Contains(err.Error(), "at least one role") {
			t.Errorf("%s: err = %v, want one asking for a role", text, err)
		}
	}
	// Nodes are cluster-scoped: a hub template without a service account may not list them.
	_, err := ResolveText(ctx, `{{hub hasNodesWithExactRoles "infra" hub}}`, Config{Hub: true, Namespace: "policies", Reader: fixtureCluster{}})
	if err == nil || !strings.Contains(err.Error(), "serviceAccountName") {
		t.Errorf("err = %v, want a refusal pointing at hubTemplateOptions.serviceAccountName", err)
	}
}
