package opa

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
)

// Answer is what a placement policy's package evaluates to for one Placement. Other keys of the
// package (helper rules) are ignored, so a policy can keep its helpers beside the answer.
type Answer struct {
	// Errors, when not empty, deny the Placement with these messages.
	Errors []string
	// Annotations are merged into the Placement's; the answer wins on overlap. A value that is not
	// a string is written as its JSON (the seed's answers carried objects).
	Annotations map[string]string
	// Required are predicates every selected cluster must satisfy one of (ORed, as OCM ORs a
	// Placement's predicates). The answer's requiredClusterSelector is shorthand for one.
	Required []clusterv1beta1.ClusterPredicate
}

// decodeAnswer reads an evaluated package document. An undefined document (defined false) is the
// empty answer: the policy has nothing to say about this Placement.
func decodeAnswer(doc any, defined bool) (Answer, error) {
	var a Answer
	if !defined || doc == nil {
		return a, nil
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return a, fmt.Errorf("the answer is %T, want an object with errors, annotations, requiredClusterSelector or predicates", doc)
	}
	if v, ok := obj["errors"]; ok {
		list, ok := v.([]any)
		if !ok {
			return a, fmt.Errorf("errors is %T, want a set or array of strings", v)
		}
		for _, e := range list {
			s, ok := e.(string)
			if !ok {
				raw, _ := json.Marshal(e)
				s = string(raw)
			}
			a.Errors = append(a.Errors, s)
		}
		sort.Strings(a.Errors)
	}
	if v, ok := obj["annotations"]; ok {
		m, ok := v.(map[string]any)
		if !ok {
			return a, fmt.Errorf("annotations is %T, want an object", v)
		}
		a.Annotations = make(map[string]string, len(m))
		for k, val := range m {
			if s, ok := val.(string); ok {
				a.Annotations[k] = s
				continue
			}
			raw, err := json.Marshal(val)
			if err != nil {
				return a, fmt.Errorf("annotation %s: %w", k, err)
			}
			a.Annotations[k] = string(raw)
		}
	}
	if v, ok := obj["predicates"]; ok {
		if err := strictDecode(v, &a.Required); err != nil {
			return a, fmt.Errorf("predicates: %w", err)
		}
	}
	if v, ok := obj["requiredClusterSelector"]; ok {
		var sel clusterv1beta1.ClusterSelector
		if err := strictDecode(v, &sel); err != nil {
			return a, fmt.Errorf("requiredClusterSelector: %w", err)
		}
		a.Required = append(a.Required, clusterv1beta1.ClusterPredicate{RequiredClusterSelector: sel})
	}
	return a, nil
}

// strictDecode converts an evaluated value into out, refusing fields out does not have: a typo in
// a selector must not silently widen what a Placement may select.
func strictDecode(v any, out any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(out)
}
