package configpolicy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/spoke-addon/compliancemessage"
	"regent.dev/regent/test/corpora"
)

// collectionPolicies returns the ConfigurationPolicies of every Policy in policy-collection, each
// with its Policy's remediationAction applied as the template sync applies it.
func collectionPolicies(t testing.TB) map[string]*unstructured.Unstructured {
	t.Helper()
	dir := corpora.Dir(t, "policy-collection")
	out := map[string]*unstructured.Unstructured{}
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
			remediation, _, _ := unstructured.NestedString(doc, "spec", "remediationAction")
			templates, _, _ := unstructured.NestedSlice(doc, "spec", "policy-templates")
			for _, tmpl := range templates {
				def, _ := tmpl.(map[string]any)["objectDefinition"].(map[string]any)
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
	return out
}

// testPolicyCollection applies every policy-collection ConfigurationPolicy unchanged (strict
// validation) and checks each is evaluated: Compliant or NonCompliant as this bare cluster
// dictates, with a message per template, never stuck on an evaluation error.
func testPolicyCollection(t *testing.T, c client.Client) {
	policies := collectionPolicies(t)
	if len(policies) < 10 {
		t.Fatalf("found %d ConfigurationPolicies in policy-collection", len(policies))
	}
	namespace(t, c, "collection", nil)
	for source, obj := range policies {
		obj.SetNamespace("collection")
		if err := c.Create(context.Background(), obj); err != nil {
			t.Errorf("%s: %v", source, err)
		}
	}
	for source, obj := range policies {
		p := waitForPolicy(t, c, "collection", obj.GetName(), "evaluated ("+source+")", func(p *policyv1.ConfigurationPolicy) bool {
			return p.Status.ComplianceState != "" && p.Status.LastEvaluatedGeneration == p.Generation
		})
		for i, d := range p.Status.CompliancyDetails {
			if len(d.Conditions) == 0 || d.Conditions[0].Message == "" {
				t.Errorf("%s: template %d has no message: %+v", source, i, d)
			}
		}
		t.Logf("%s: %s", source, compliancemessage.Of(p.Status))
	}
	scc := waitForPolicy(t, c, "collection", "policy-scc-example", "evaluated", func(p *policyv1.ConfigurationPolicy) bool { return p.Status.ComplianceState != "" })
	if msg := compliancemessage.Of(scc.Status); scc.Status.ComplianceState != policyv1.NonCompliant || !strings.Contains(msg, "couldn't find mapping resource with kind SecurityContextConstraints") {
		t.Errorf("SecurityContextConstraints policy: %s", msg)
	}
}

// testPolicyCollectionEnforced enforces the collection's ConfigurationPolicies whose kinds this
// cluster serves and checks they converge to Compliant: the objects are created and, on the next
// evaluation, found as specified despite the fields the apiserver defaults.
func testPolicyCollectionEnforced(t *testing.T, c client.Client) {
	namespace(t, c, "collection-enforced", nil)
	want := map[string]bool{
		"policy-role-example": true, "policy-rolebinding-example": true, "policy-limitrange-example": true,
		"policy-namespace-example": true, "policy-pod-example": true, "comp-operator-ns": true,
		"policy-zts-cmc": true, "policy-zts-cmc-reloader-deployment": true,
	}
	for source, obj := range collectionPolicies(t) {
		if !want[obj.GetName()] {
			continue
		}
		delete(want, obj.GetName())
		obj.SetNamespace("collection-enforced")
		_ = unstructured.SetNestedField(obj.Object, "enforce", "spec", "remediationAction")
		if err := c.Create(context.Background(), obj); err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		p := state(t, c, "collection-enforced", obj.GetName(), policyv1.Compliant, "found as specified")
		t.Logf("%s: %s", source, compliancemessage.Of(p.Status))
	}
	if len(want) > 0 {
		t.Errorf("policy-collection no longer has %v", want)
	}
}
