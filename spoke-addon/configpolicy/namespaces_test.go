package configpolicy

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

func TestSelectNamespaces(t *testing.T) {
	cluster := []namespaceInfo{
		{Name: "default"},
		{Name: "kube-system", Labels: map[string]string{"tier": "system"}},
		{Name: "prod-a", Labels: map[string]string{"env": "prod"}},
		{Name: "prod-b", Labels: map[string]string{"env": "prod", "team": "b"}},
		{Name: "dev", Labels: map[string]string{"env": "dev"}},
	}
	for _, tc := range []struct {
		name string
		sel  policyv1.NamespaceSelector
		want []string
	}{
		{"nothing given selects nothing", policyv1.NamespaceSelector{}, nil},
		{"include names exactly", policyv1.NamespaceSelector{Include: []policyv1.NonEmptyString{"default"}}, []string{"default"}},
		{"include wildcards", policyv1.NamespaceSelector{Include: []policyv1.NonEmptyString{"prod-*"}}, []string{"prod-a", "prod-b"}},
		{"exclude wildcards win over include",
			policyv1.NamespaceSelector{Include: []policyv1.NonEmptyString{"*"}, Exclude: []policyv1.NonEmptyString{"kube-*", "prod-?"}},
			[]string{"default", "dev"}},
		{"matchLabels alone includes every namespace with the labels",
			policyv1.NamespaceSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}},
			[]string{"prod-a", "prod-b"}},
		{"matchExpressions combine with include",
			policyv1.NamespaceSelector{Include: []policyv1.NonEmptyString{"prod-*", "dev"}, LabelSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpDoesNotExist}}}},
			[]string{"dev", "prod-a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := selectNamespaces(tc.sel, cluster)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("selectNamespaces = %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := selectNamespaces(policyv1.NamespaceSelector{Include: []policyv1.NonEmptyString{"[bad"}}, cluster); err == nil {
		t.Error("a malformed pattern gave no error")
	}
}
