package opa

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
)

// AppliedAnnotation records on a Placement what Regent added to its predicates: the author's own
// predicates and the policy's required ones, as JSON {"user":[…],"required":[…]}. With it an
// update or a remediation recovers the author's predicates exactly and replaces only Regent's
// part, so applying the same answer twice changes nothing.
const AppliedAnnotation = "regent.dev/placement-predicates"

type appliedRecord struct {
	User     []clusterv1beta1.ClusterPredicate `json:"user"`
	Required []clusterv1beta1.ClusterPredicate `json:"required"`
}

// specPredicates reads spec.predicates of an unstructured Placement.
func specPredicates(obj map[string]any) ([]clusterv1beta1.ClusterPredicate, error) {
	spec, _ := obj["spec"].(map[string]any)
	raw, ok := spec["predicates"]
	if !ok || raw == nil {
		return nil, nil
	}
	var preds []clusterv1beta1.ClusterPredicate
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &preds); err != nil {
		return nil, fmt.Errorf("spec.predicates: %w", err)
	}
	return preds, nil
}

func annotationsOf(obj map[string]any) map[string]any {
	md, _ := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	return ann
}

// userPredicates returns the predicates as the Placement's author wrote them. While the recorded
// user ∧ required still is spec.predicates, that is the recorded user part; once the author has
// replaced spec.predicates (kubectl apply of their manifest), the spec's own are theirs.
func userPredicates(obj map[string]any) ([]clusterv1beta1.ClusterPredicate, error) {
	current, err := specPredicates(obj)
	if err != nil {
		return nil, err
	}
	rec, ok := annotationsOf(obj)[AppliedAnnotation].(string)
	if !ok {
		return current, nil
	}
	var r appliedRecord
	if err := json.Unmarshal([]byte(rec), &r); err != nil {
		// A hand-edited record is not Regent's any more: the spec is the author's.
		return current, nil
	}
	if samePredicates(combinePredicates(r.User, r.Required), current) {
		return r.User, nil
	}
	return current, nil
}

// authorView is the Placement a policy is asked about: the author's predicates, without Regent's
// addition or its record, so the answer depends on what the author asked for and not on what an
// earlier answer added (which makes the merge a fixed point).
func authorView(obj map[string]any) (map[string]any, error) {
	user, err := userPredicates(obj)
	if err != nil {
		return nil, err
	}
	out := runtime.DeepCopyJSON(obj)
	if ann := annotationsOf(out); ann != nil {
		delete(ann, AppliedAnnotation)
	}
	if err := setPredicates(out, user); err != nil {
		return nil, err
	}
	return out, nil
}

// mergeAnswer returns a copy of the Placement with the answer applied: annotations merged (the
// answer wins), and spec.predicates = the author's predicates ANDed with the required ones (see
// combinePredicates), recorded in AppliedAnnotation. With nothing required, the author's
// predicates are restored and the record removed. changed reports whether the copy differs.
func mergeAnswer(obj map[string]any, a Answer) (out map[string]any, changed bool, err error) {
	user, err := userPredicates(obj)
	if err != nil {
		return nil, false, err
	}
	out = runtime.DeepCopyJSON(obj)
	md, _ := out["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		out["metadata"] = md
	}
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	for k, v := range a.Annotations {
		if k == AppliedAnnotation {
			continue // Regent's own record is not the policy's to set
		}
		ann[k] = v
	}
	want := user
	if len(a.Required) > 0 {
		want = combinePredicates(user, a.Required)
		rec, err := json.Marshal(appliedRecord{User: user, Required: a.Required})
		if err != nil {
			return nil, false, err
		}
		ann[AppliedAnnotation] = string(rec)
	} else {
		delete(ann, AppliedAnnotation)
	}
	if len(ann) > 0 {
		md["annotations"] = ann
	} else {
		delete(md, "annotations")
	}
	current, err := specPredicates(out)
	if err != nil {
		return nil, false, err
	}
	if !samePredicates(current, want) {
		if err := setPredicates(out, want); err != nil {
			return nil, false, err
		}
	}
	return out, !reflect.DeepEqual(obj, out), nil
}

func setPredicates(obj map[string]any, preds []clusterv1beta1.ClusterPredicate) error {
	spec, _ := obj["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
		obj["spec"] = spec
	}
	if len(preds) == 0 {
		delete(spec, "predicates")
		return nil
	}
	b, err := json.Marshal(preds)
	if err != nil {
		return err
	}
	var v []any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	spec["predicates"] = v
	return nil
}

func samePredicates(a, b []clusterv1beta1.ClusterPredicate) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// combinePredicates is the predicates that select exactly the clusters the author's predicates
// select AND the required ones allow. OCM ORs a Placement's predicates, so (u1 ∨ u2) ∧ (r1 ∨ r2)
// becomes every pair ui ∧ rj; no author predicate means "any cluster", so the result is then the
// required predicates themselves. Within a pair the selectors are ANDed field by field.
func combinePredicates(user, required []clusterv1beta1.ClusterPredicate) []clusterv1beta1.ClusterPredicate {
	if len(required) == 0 {
		return user
	}
	if len(user) == 0 {
		user = []clusterv1beta1.ClusterPredicate{{}}
	}
	out := make([]clusterv1beta1.ClusterPredicate, 0, len(user)*len(required))
	for _, u := range user {
		for _, r := range required {
			out = append(out, clusterv1beta1.ClusterPredicate{
				RequiredClusterSelector: andSelectors(u.RequiredClusterSelector, r.RequiredClusterSelector),
			})
		}
	}
	return out
}

// andSelectors returns a selector matching what both a and b match. a's matchLabels stay as they
// are; b's become `key In [value]` expressions, so a conflicting value (a wants region=us, b
// region=eu) matches nothing instead of overwriting a's. Requirements already present are not
// repeated, which keeps combining idempotent.
func andSelectors(a, b clusterv1beta1.ClusterSelector) clusterv1beta1.ClusterSelector {
	out := *a.DeepCopy()
	keys := make([]string, 0, len(b.LabelSelector.MatchLabels))
	for k := range b.LabelSelector.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := b.LabelSelector.MatchLabels[k]
		if have, ok := out.LabelSelector.MatchLabels[k]; ok && have == v {
			continue
		}
		out.LabelSelector.MatchExpressions = addRequirement(out.LabelSelector.MatchExpressions,
			metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
	}
	for _, r := range b.LabelSelector.MatchExpressions {
		out.LabelSelector.MatchExpressions = addRequirement(out.LabelSelector.MatchExpressions, r)
	}
	for _, r := range b.ClaimSelector.MatchExpressions {
		out.ClaimSelector.MatchExpressions = addRequirement(out.ClaimSelector.MatchExpressions, r)
	}
	for _, e := range b.CelSelector.CelExpressions {
		present := false
		for _, have := range out.CelSelector.CelExpressions {
			present = present || have == e
		}
		if !present {
			out.CelSelector.CelExpressions = append(out.CelSelector.CelExpressions, e)
		}
	}
	return out
}

func addRequirement(reqs []metav1.LabelSelectorRequirement, r metav1.LabelSelectorRequirement) []metav1.LabelSelectorRequirement {
	for _, have := range reqs {
		if reflect.DeepEqual(have, r) {
			return reqs
		}
	}
	return append(reqs, *r.DeepCopy())
}
