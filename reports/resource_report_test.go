package reports

import (
	"reflect"
	"strings"
	"testing"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
)

var (
	cm      = Resource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "settings", UID: "1111-2222"}
	cmRef   = corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "settings", UID: "1111-2222"}
	polA    = PolicyRef{Scope: reportsv1alpha1.PolicyScopeCluster, Name: "a"}
	polB    = PolicyRef{Scope: reportsv1alpha1.PolicyScopeNamespaced, Name: "b"}
	fail    = openreportsv1alpha1.ReportResult{Rule: "r", Result: "fail", Description: "missing label"}
	pass    = openreportsv1alpha1.ReportResult{Rule: "r", Result: "pass"}
	scopeOf = func(s reportsv1alpha1.PolicyScope) map[string]string {
		return map[string]string{reportsv1alpha1.PolicyScopeProperty: string(s)}
	}
)

func TestDesired_NewReportIsNamedByUIDOwnedByTheResourceAndLabelled(t *testing.T) {
	got := Desired(nil, cm, reportsv1alpha1.SourceAdmission, []PolicyResults{{Policy: polA, Version: "3", Results: []openreportsv1alpha1.ReportResult{fail}}}, nil)
	r, ok := got.(*reportsv1alpha1.ResourceReport)
	if !ok {
		t.Fatalf("a namespaced resource got a %T", got)
	}
	if r.Name != "1111-2222" || r.Namespace != "team-a" {
		t.Errorf("name %s/%s, want team-a/1111-2222", r.Namespace, r.Name)
	}
	wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "settings", UID: "1111-2222"}}
	if !reflect.DeepEqual(r.OwnerReferences, wantOwner) {
		t.Errorf("owner %+v, want %+v", r.OwnerReferences, wantOwner)
	}
	wantLabels := map[string]string{
		reportsv1alpha1.LabelResourceUID:     "1111-2222",
		reportsv1alpha1.LabelResourceGroup:   "",
		reportsv1alpha1.LabelResourceVersion: "v1",
		reportsv1alpha1.LabelResourceKind:    "ConfigMap",
		reportsv1alpha1.LabelSource:          "admission",
		"cpol.reports.regent.dev/a":          "3",
	}
	if !reflect.DeepEqual(r.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", r.Labels, wantLabels)
	}
	// stored without the subject (the owner) and without the cluster scope (the default)...
	stored := fail
	stored.Policy = "a"
	if !reflect.DeepEqual(r.Spec.Results, []openreportsv1alpha1.ReportResult{stored}) {
		t.Errorf("results %+v, want %+v", r.Spec.Results, stored)
	}
	// ...and read back naming the resource
	want := stored
	want.Subjects = []corev1.ObjectReference{cmRef}
	if got := WithSubjects(r); !reflect.DeepEqual(got, []openreportsv1alpha1.ReportResult{want}) {
		t.Errorf("results with subjects %+v, want %+v", got, want)
	}
	if ScopeOf(&r.Spec.Results[0]) != reportsv1alpha1.PolicyScopeCluster {
		t.Errorf("a result without the scope property is not cluster-wide")
	}
}

func TestDesired_ClusterScopedResourceGetsAClusterResourceReport(t *testing.T) {
	ns := Resource{APIVersion: "v1", Kind: "Namespace", Name: "team-a", UID: "u"}
	if got := Desired(nil, ns, reportsv1alpha1.SourceBackground, nil, nil); reflect.TypeOf(got) != reflect.TypeOf(&reportsv1alpha1.ClusterResourceReport{}) {
		t.Fatalf("got %T", got)
	}
}

func TestDesired_ReplacesOnlyTheGivenPoliciesAndDropsRemovedOnes(t *testing.T) {
	first := Desired(nil, cm, reportsv1alpha1.SourceAdmission, []PolicyResults{
		{Policy: polA, Version: "1", Results: []openreportsv1alpha1.ReportResult{fail}},
		{Policy: polB, Version: "7", Results: []openreportsv1alpha1.ReportResult{fail, pass}},
	}, nil)
	firstCopy := first.DeepCopyObject()
	// policy a changed and now passes; b is untouched
	second := Desired(first, cm, reportsv1alpha1.SourceBackground, []PolicyResults{{Policy: polA, Version: "2", Results: []openreportsv1alpha1.ReportResult{pass}}}, nil)
	if !reflect.DeepEqual(first, firstCopy) {
		t.Fatal("Desired modified the current report")
	}
	var outcomes []string
	for _, r := range second.ReportSpec().Results {
		outcomes = append(outcomes, r.Policy+"="+string(r.Result))
	}
	if want := "a=pass b=fail b=pass"; strings.Join(outcomes, " ") != want {
		t.Errorf("results %v, want %s", outcomes, want)
	}
	l := second.GetLabels()
	if l["cpol.reports.regent.dev/a"] != "2" || l["pol.reports.regent.dev/b"] != "7" || l[reportsv1alpha1.LabelSource] != "background" {
		t.Errorf("labels %v", l)
	}
	third := Desired(second, cm, reportsv1alpha1.SourceBackground, nil, []PolicyRef{polB})
	if len(third.ReportSpec().Results) != 1 || third.ReportSpec().Results[0].Policy != "a" {
		t.Errorf("after dropping b: %+v", third.ReportSpec().Results)
	}
	if _, ok := third.GetLabels()["pol.reports.regent.dev/b"]; ok {
		t.Errorf("label of dropped policy b kept: %v", third.GetLabels())
	}
}

func TestDesired_SameInputsGiveEqualReports(t *testing.T) {
	set := []PolicyResults{{Policy: polB, Version: "1", Results: []openreportsv1alpha1.ReportResult{pass, fail}}, {Policy: polA, Version: "1", Results: []openreportsv1alpha1.ReportResult{fail}}}
	a := Desired(nil, cm, reportsv1alpha1.SourceAdmission, set, nil)
	b := Desired(a, cm, reportsv1alpha1.SourceAdmission, []PolicyResults{set[1], set[0]}, nil)
	if !sameReport(a, b) {
		t.Errorf("re-applying the same results changed the report:\n%+v\n%+v", a, b)
	}
}

func TestDesired_LongPolicyNameIsHashedWithTheNameInAnAnnotation(t *testing.T) {
	long := PolicyRef{Scope: reportsv1alpha1.PolicyScopeCluster, Name: strings.Repeat("p", 100)}
	got := Desired(nil, cm, reportsv1alpha1.SourceAdmission, []PolicyResults{{Policy: long, Version: "5"}}, nil)
	key, hashed := reportsv1alpha1.PolicyLabelKey(long.Scope, long.Name)
	if !hashed || got.GetLabels()[key] != "5" || got.GetAnnotations()[key] != long.Name {
		t.Errorf("labels %v annotations %v; want %s=5 in both (name in the annotation)", got.GetLabels(), got.GetAnnotations(), key)
	}
	dropped := Desired(got, cm, reportsv1alpha1.SourceAdmission, nil, []PolicyRef{long})
	if len(dropped.GetAnnotations()) != 0 {
		t.Errorf("annotation kept after the policy was dropped: %v", dropped.GetAnnotations())
	}
}
