package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
)

// policyNeed is a kind a policy file makes the spoke addon touch, and whether it writes it.
type policyNeed struct {
	gvk    schema.GroupVersionKind
	source string
	write  bool
}

// policyNeeds reads every Policy under dir: its templates, which template sync creates, updates
// and deletes; and each ConfigurationPolicy's object templates, which it reads and, where the
// Policy's remediationAction (or the ConfigurationPolicy's own, without one) is enforce, writes.
func policyNeeds(t *testing.T, dir string) []policyNeed {
	t.Helper()
	var needs []policyNeed
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			doc := map[string]any{}
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return err
			}
			if doc["kind"] != "Policy" {
				continue
			}
			rel, _ := filepath.Rel(dir, path)
			remediation, _, _ := unstructured.NestedString(doc, "spec", "remediationAction")
			templates, _, _ := unstructured.NestedSlice(doc, "spec", "policy-templates")
			for _, tmpl := range templates {
				def, _ := tmpl.(map[string]any)["objectDefinition"].(map[string]any)
				u := &unstructured.Unstructured{Object: def}
				needs = append(needs, policyNeed{gvk: u.GroupVersionKind(), source: rel, write: true})
				if u.GetKind() != "ConfigurationPolicy" {
					continue
				}
				action := remediation
				if action == "" {
					action, _, _ = unstructured.NestedString(def, "spec", "remediationAction")
				}
				objects, _, _ := unstructured.NestedSlice(def, "spec", "object-templates")
				for _, o := range objects {
					obj, _ := o.(map[string]any)["objectDefinition"].(map[string]any)
					needs = append(needs, policyNeed{gvk: (&unstructured.Unstructured{Object: obj}).GroupVersionKind(), source: rel + "#" + u.GetName(),
						write: strings.EqualFold(action, "enforce")})
				}
			}
		}
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return needs
}

// checkNeedsGranted asks the API server, for every need, whether the agent's ServiceAccount may
// read (get, list, watch) and, for a write, create, update, patch and delete its resource
// cluster-wide. A kind the cluster does not serve (an OpenShift or operator CRD) is named by its
// guessed plural, which is what RBAC matches.
func checkNeedsGranted(t *testing.T, admin *rest.Config, mapper meta.RESTMapper, needs []policyNeed) {
	t.Helper()
	checked := map[string]bool{}
	for _, n := range needs {
		gvr, _ := meta.UnsafeGuessKindToResource(n.gvk)
		if m, err := mapper.RESTMapping(n.gvk.GroupKind(), n.gvk.Version); err == nil {
			gvr = m.Resource
		}
		verbs := readVerbs
		if n.write {
			verbs = append(append([]string{}, readVerbs...), writeVerbs...)
		}
		for _, verb := range verbs {
			key := verb + " " + gvr.GroupResource().String()
			if checked[key] {
				continue
			}
			checked[key] = true
			if !allowed(t, admin, verb, gvr.Group, gvr.Resource, "") {
				t.Errorf("%s: the agent may not %s (%s), which the policy needs", n.source, key, n.gvk.Kind)
			}
		}
	}
	t.Logf("%d policy needs, %d verb/resource pairs granted", len(needs), len(checked))
}

var (
	readVerbs  = []string{"get", "list", "watch"}
	writeVerbs = []string{"create", "update", "patch", "delete"}
)
