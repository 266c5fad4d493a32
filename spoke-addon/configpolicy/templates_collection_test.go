package configpolicy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/spoke-addon/compliancemessage"
	"regent.dev/regent/templates"
	"regent.dev/regent/test/corpora"
)

// emptyHub answers every hub-template read with "not found": the collection's hub templates are
// checked for what Regent's engine understands, not for the objects of a hub that is not there.
type emptyHub struct{}

func (emptyHub) Get(context.Context, string, string, string, string) (*unstructured.Unstructured, error) {
	return nil, nil
}

func (emptyHub) List(context.Context, string, string, string, string) ([]unstructured.Unstructured, error) {
	return nil, nil
}

// TestPolicyCollectionTemplates applies policy-collection's templated ConfigurationPolicies
// (managed-cluster templates, hub templates, object-templates-raw; all refused before) and counts
// how many the engine parses and evaluates. A bare cluster lacks the Secrets and operators they
// read, so a read that finds nothing is an accepted policy; an unknown function or a parse error
// is not.
func TestPolicyCollectionTemplates(t *testing.T) {
	all, unreadable := templatedCollection(t)
	hub := fleettest.Hub(t)
	c, _ := startController(t, hub.Config, Options{})
	namespace(t, c, "collection-templates", nil)
	var spoke []*unstructured.Unstructured
	hubTemplated, hubParsed, refused := 0, 0, 0
	for source, obj := range all {
		raw, err := json.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		if templates.HasTemplates(raw, true) {
			hubTemplated++
			out, err := templates.ResolveJSON(context.Background(), raw, templates.Config{Hub: true, Namespace: "policies", Reader: emptyHub{},
				Data: map[string]any{"ManagedClusterName": "cluster1", "ManagedClusterLabels": map[string]string{}, "PolicyMetadata": map[string]any{"name": obj.GetName(), "namespace": "policies"}}})
			if err != nil && (strings.Contains(err.Error(), "failed to parse") || strings.Contains(err.Error(), "not defined")) {
				t.Logf("hub template not understood: %s: %v", source, err)
				continue
			}
			hubParsed++
			if err != nil {
				continue // a read of a hub object this test has not got
			}
			obj = &unstructured.Unstructured{}
			if err := json.Unmarshal(out, &obj.Object); err != nil {
				t.Fatal(err)
			}
		}
		if !templates.HasTemplates(raw, false) && obj.Object["spec"].(map[string]any)["object-templates-raw"] == nil {
			continue
		}
		obj.SetNamespace("collection-templates")
		obj.SetName(obj.GetName())
		if err := c.Create(context.Background(), obj); err != nil {
			t.Logf("refused by the apiserver: %s: %v", source, err)
			refused++
			continue
		}
		spoke = append(spoke, obj)
	}
	accepted := 0
	for _, obj := range spoke {
		p := waitForPolicy(t, c, "collection-templates", obj.GetName(), "evaluated", func(p *policyv1.ConfigurationPolicy) bool {
			return p.Status.ComplianceState != "" && p.Status.LastEvaluatedGeneration == p.Generation
		})
		msg := compliancemessage.Of(p.Status)
		if strings.Contains(msg, "failed to parse") || strings.Contains(msg, "not defined") || strings.Contains(msg, "does not render") {
			t.Logf("not understood: %s: %s", obj.GetName(), msg)
			continue
		}
		accepted++
	}
	t.Logf("policy-collection: %d files not YAML objects (skipped)", unreadable)
	t.Logf("policy-collection: %d ConfigurationPolicies, %d with managed-cluster templates or object-templates-raw applied (%d evaluated without template errors, %d refused by the apiserver), %d with hub templates (%d parsed and resolved)",
		len(all), len(spoke), accepted, refused, hubTemplated, hubParsed)
	if accepted == 0 || accepted < len(spoke)*9/10 {
		t.Errorf("only %d of %d templated policies were understood", accepted, len(spoke))
	}
}

// templatedCollection reads policy-collection's ConfigurationPolicies as collectionPolicies does,
// but tolerates the files that are no Kubernetes objects (kustomize inputs, lists): the full
// collection has some, and they are no policy this test is about.
func templatedCollection(t *testing.T) (map[string]*unstructured.Unstructured, int) {
	dir := corpora.Dir(t, "policy-collection")
	out := map[string]*unstructured.Unstructured{}
	unreadable := 0
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
				unreadable++
				return nil
			}
			if doc["kind"] != "Policy" {
				continue
			}
			remediation, _, _ := unstructured.NestedString(doc, "spec", "remediationAction")
			tmpls, _, _ := unstructured.NestedSlice(doc, "spec", "policy-templates")
			for _, tmpl := range tmpls {
				m, _ := tmpl.(map[string]any)
				def, _ := m["objectDefinition"].(map[string]any)
				if def["kind"] != "ConfigurationPolicy" {
					continue
				}
				obj := &unstructured.Unstructured{Object: def}
				if remediation != "" {
					_ = unstructured.SetNestedField(obj.Object, remediation, "spec", "remediationAction")
				}
				out[path+"#"+obj.GetName()] = obj
			}
		}
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return out, unreadable
}
