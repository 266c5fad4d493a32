package dryrun

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// ReadObjects reads every object of a YAML or JSON stream of documents; a List (kind v1 List or
// any *List with items) gives its items.
func ReadObjects(r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		var raw []byte
		var doc yamlDoc
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		raw = doc.raw
		if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", i+1, err)
			}
			for j := range list.Items {
				out = append(out, &list.Items[j])
			}
			continue
		}
		out = append(out, u)
	}
}

// yamlDoc keeps a document's JSON as decoded, so numbers reach unstructured's own decoder, which
// keeps integers as int64.
type yamlDoc struct{ raw []byte }

func (d *yamlDoc) UnmarshalJSON(b []byte) error {
	d.raw = append([]byte(nil), b...)
	return nil
}

// ReadPolicy reads a ConfigurationPolicy, or an OCM Policy whose policy-templates hold one (the
// first is taken, as OCM's dryrun does).
func ReadPolicy(doc []byte) (*policyv1.ConfigurationPolicy, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			PolicyTemplates []struct {
				ObjectDefinition map[string]any `json:"objectDefinition"`
			} `json:"policy-templates"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return nil, fmt.Errorf("parse policy: %w", err)
	}
	if head.APIVersion != policyv1.GroupVersion.String() {
		return nil, fmt.Errorf("policy has apiVersion %q, want %s", head.APIVersion, policyv1.GroupVersion)
	}
	switch head.Kind {
	case "ConfigurationPolicy":
	case "Policy":
		found := false
		for _, t := range head.Spec.PolicyTemplates {
			if t.ObjectDefinition["kind"] == "ConfigurationPolicy" {
				b, err := yaml.Marshal(t.ObjectDefinition)
				if err != nil {
					return nil, err
				}
				doc, found = b, true
				break
			}
		}
		if !found {
			return nil, errors.New("the Policy has no ConfigurationPolicy in its policy-templates")
		}
	default:
		return nil, fmt.Errorf("policy is a %s, want a ConfigurationPolicy or a Policy holding one", head.Kind)
	}
	p := &policyv1.ConfigurationPolicy{}
	// Not strict: the apiserver drops fields the CRD does not know, and so does the controller.
	if err := yaml.Unmarshal(doc, p); err != nil {
		return nil, fmt.Errorf("parse ConfigurationPolicy: %w", err)
	}
	if len(p.Spec.ObjectTemplates) == 0 && strings.TrimSpace(p.Spec.ObjectTemplatesRaw) == "" {
		return nil, errors.New("the ConfigurationPolicy has no object-templates")
	}
	return p, nil
}
