package opa

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
)

func labelPredicate(match map[string]string, exprs ...metav1.LabelSelectorRequirement) clusterv1beta1.ClusterPredicate {
	return clusterv1beta1.ClusterPredicate{RequiredClusterSelector: clusterv1beta1.ClusterSelector{
		LabelSelector: metav1.LabelSelector{MatchLabels: match, MatchExpressions: exprs}}}
}

func in(key string, values ...string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOpIn, Values: values}
}

// selects reports whether OCM would select a cluster with these labels: any predicate's label
// selector matches (predicates are ORed).
func selects(t *testing.T, preds []clusterv1beta1.ClusterPredicate, clusterLabels map[string]string) bool {
	t.Helper()
	if len(preds) == 0 {
		return true
	}
	for _, p := range preds {
		sel, err := metav1.LabelSelectorAsSelector(&p.RequiredClusterSelector.LabelSelector)
		if err != nil {
			t.Fatal(err)
		}
		if sel.Matches(labels.Set(clusterLabels)) {
			return true
		}
	}
	return false
}

// The combined predicates select exactly the clusters the author's select AND the required ones
// allow, for every shape of author predicates OCM accepts (none, one, several ORed).
func TestCombinePredicates_SelectsTheIntersection(t *testing.T) {
	euPCI := []clusterv1beta1.ClusterPredicate{labelPredicate(map[string]string{"region": "eu"}, in("pci-level", "2", "3"))}
	clusters := []map[string]string{
		{"region": "eu", "pci-level": "3"},
		{"region": "eu", "pci-level": "1"},
		{"region": "us", "pci-level": "3"},
		{"region": "eu", "pci-level": "2", "env": "dev"},
		{"region": "us", "env": "dev"},
		{},
	}
	for name, tc := range map[string]struct {
		user, required []clusterv1beta1.ClusterPredicate
	}{
		"no author predicates":         {nil, euPCI},
		"one author predicate":         {[]clusterv1beta1.ClusterPredicate{labelPredicate(map[string]string{"env": "dev"})}, euPCI},
		"author asks for the US":       {[]clusterv1beta1.ClusterPredicate{labelPredicate(map[string]string{"region": "us"})}, euPCI},
		"author predicates are ORed":   {[]clusterv1beta1.ClusterPredicate{labelPredicate(map[string]string{"env": "dev"}), labelPredicate(nil, in("pci-level", "3"))}, euPCI},
		"required predicates are ORed": {[]clusterv1beta1.ClusterPredicate{labelPredicate(map[string]string{"env": "dev"})}, []clusterv1beta1.ClusterPredicate{labelPredicate(map[string]string{"region": "eu"}), labelPredicate(map[string]string{"region": "us"})}},
		"nothing required":             {[]clusterv1beta1.ClusterPredicate{labelPredicate(map[string]string{"env": "dev"})}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			got := combinePredicates(tc.user, tc.required)
			for _, c := range clusters {
				want := selects(t, tc.user, c) && (len(tc.required) == 0 || selects(t, tc.required, c))
				if selects(t, got, c) != want {
					t.Errorf("cluster %v: combined predicates select it = %v, want %v (combined %+v)", c, !want, want, got)
				}
			}
			// Combining again selects the same clusters (the merge never does: it recovers the
			// author's part from its record), and with one required predicate adds nothing.
			again := combinePredicates(got, tc.required)
			for _, c := range clusters {
				if selects(t, again, c) != selects(t, got, c) {
					t.Errorf("cluster %v: combining twice changes the selection", c)
				}
			}
			if len(tc.required) == 1 && !samePredicates(again, got) {
				t.Errorf("combining twice adds requirements again:\n%+v\n%+v", got, again)
			}
		})
	}
}

func placementObj(t *testing.T, annotations map[string]string, preds []clusterv1beta1.ClusterPredicate) map[string]any {
	t.Helper()
	p := clusterv1beta1.Placement{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cluster.open-cluster-management.io/v1beta1", Kind: "Placement"},
		ObjectMeta: metav1.ObjectMeta{Name: "pl", Namespace: "apps", Annotations: annotations},
		Spec:       clusterv1beta1.PlacementSpec{Predicates: preds, ClusterSets: []string{"global"}},
	}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func TestMergeAnswer_AnnotationsAnswerWinsAndRequiredIsRecorded(t *testing.T) {
	user := []clusterv1beta1.ClusterPredicate{labelPredicate(map[string]string{"env": "dev"})}
	obj := placementObj(t, map[string]string{"team": "payments", "tier": "bronze"}, user)
	ans := Answer{
		Annotations: map[string]string{"tier": "gold", "regent.dev/why": "pci", AppliedAnnotation: "forged"},
		Required:    []clusterv1beta1.ClusterPredicate{labelPredicate(map[string]string{"region": "eu"})},
	}
	out, changed, err := mergeAnswer(obj, ans)
	if err != nil || !changed {
		t.Fatalf("merge: changed=%v err=%v", changed, err)
	}
	ann := annotationsOf(out)
	if ann["team"] != "payments" || ann["tier"] != "gold" || ann["regent.dev/why"] != "pci" {
		t.Errorf("annotations %v: want the author's kept and the answer's winning", ann)
	}
	var rec appliedRecord
	if err := json.Unmarshal([]byte(ann[AppliedAnnotation].(string)), &rec); err != nil {
		t.Fatalf("record %v: %v", ann[AppliedAnnotation], err)
	}
	if !samePredicates(rec.User, user) || !samePredicates(rec.Required, ans.Required) {
		t.Errorf("record %+v does not hold the author's and the required predicates", rec)
	}
	got, _ := specPredicates(out)
	if !samePredicates(got, combinePredicates(user, ans.Required)) {
		t.Errorf("spec.predicates %+v", got)
	}
	if obj["spec"].(map[string]any)["clusterSets"] == nil || out["spec"].(map[string]any)["clusterSets"] == nil {
		t.Error("fields the merge does not own were lost")
	}

	// A fixed point: the same answer on the merged Placement changes nothing, and the policy sees
	// the author's predicates again.
	if _, changed, err := mergeAnswer(out, ans); err != nil || changed {
		t.Errorf("second merge: changed=%v err=%v, want a fixed point", changed, err)
	}
	view, err := authorView(out)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := specPredicates(view); !samePredicates(p, user) {
		t.Errorf("author view predicates %+v, want the author's %+v", p, user)
	}
	if _, ok := annotationsOf(view)[AppliedAnnotation]; ok {
		t.Error("the author view carries Regent's record")
	}

	// A new answer replaces Regent's part only.
	us := Answer{Required: []clusterv1beta1.ClusterPredicate{labelPredicate(nil, in("pci-level", "3"))}}
	next, changed, err := mergeAnswer(out, us)
	if err != nil || !changed {
		t.Fatalf("new answer: changed=%v err=%v", changed, err)
	}
	if got, _ := specPredicates(next); !samePredicates(got, combinePredicates(user, us.Required)) {
		t.Errorf("after a new answer: %+v, want the author's ANDed with the new requirement only", got)
	}

	// Nothing required any more: the author's predicates come back and the record goes.
	back, changed, err := mergeAnswer(next, Answer{})
	if err != nil || !changed {
		t.Fatalf("empty answer: changed=%v err=%v", changed, err)
	}
	if got, _ := specPredicates(back); !samePredicates(got, user) {
		t.Errorf("after an empty answer: %+v, want the author's", got)
	}
	if _, ok := annotationsOf(back)[AppliedAnnotation]; ok {
		t.Error("the record stays after nothing is required")
	}
}

// An author who replaces spec.predicates (kubectl apply of their manifest) owns them: the
// record no longer describes the spec, so the new spec is the author's and gets the requirement.
func TestMergeAnswer_AuthorReplacingPredicatesIsTheNewAuthorPart(t *testing.T) {
	req := Answer{Required: []clusterv1beta1.ClusterPredicate{labelPredicate(map[string]string{"region": "eu"})}}
	out, _, err := mergeAnswer(placementObj(t, nil, []clusterv1beta1.ClusterPredicate{labelPredicate(map[string]string{"env": "dev"})}), req)
	if err != nil {
		t.Fatal(err)
	}
	prod := []clusterv1beta1.ClusterPredicate{labelPredicate(map[string]string{"env": "prod"})}
	if err := setPredicates(out, prod); err != nil {
		t.Fatal(err)
	}
	view, err := authorView(out)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := specPredicates(view); !samePredicates(p, prod) {
		t.Errorf("author view %+v, want the replaced predicates", p)
	}
	again, _, err := mergeAnswer(out, req)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := specPredicates(again); !samePredicates(got, combinePredicates(prod, req.Required)) {
		t.Errorf("got %+v", got)
	}
}

func TestDecodeAnswer(t *testing.T) {
	for name, tc := range map[string]struct {
		doc     any
		defined bool
		want    Answer
		err     string
	}{
		"undefined":          {nil, false, Answer{}, ""},
		"errors sorted":      {map[string]any{"errors": []any{"b", "a"}}, true, Answer{Errors: []string{"a", "b"}}, ""},
		"helpers ignored":    {map[string]any{"allowed": []any{"x"}, "levels": 3}, true, Answer{}, ""},
		"object annotation":  {map[string]any{"annotations": map[string]any{"k": map[string]any{"w": 1}}}, true, Answer{Annotations: map[string]string{"k": `{"w":1}`}}, ""},
		"selector shorthand": {map[string]any{"requiredClusterSelector": map[string]any{"labelSelector": map[string]any{"matchLabels": map[string]any{"region": "eu"}}}}, true, Answer{Required: []clusterv1beta1.ClusterPredicate{labelPredicate(map[string]string{"region": "eu"})}}, ""},
		"typo in selector":   {map[string]any{"requiredClusterSelector": map[string]any{"labelSelecter": map[string]any{}}}, true, Answer{}, "unknown field"},
		"not an object":      {"deny", true, Answer{}, "want an object"},
		"errors not a list":  {map[string]any{"errors": "no"}, true, Answer{}, "errors is string"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := decodeAnswer(tc.doc, tc.defined)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
