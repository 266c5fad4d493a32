package aggregate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"testing"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
)

func result(policy string, scope reportsv1alpha1.PolicyScope, rule, resource string, outcome openreportsv1alpha1.Result) openreportsv1alpha1.ReportResult {
	return openreportsv1alpha1.ReportResult{
		Policy: policy, Rule: rule, Result: outcome,
		Properties: map[string]string{reportsv1alpha1.PolicyScopeProperty: string(scope)},
		Subjects:   []corev1.ObjectReference{{Kind: "ConfigMap", Namespace: "ns", Name: resource, UID: types.UID("uid-" + resource)}},
	}
}

func spec(results ...openreportsv1alpha1.ReportResult) *reportsv1alpha1.ResourceReportSpec {
	return &reportsv1alpha1.ResourceReportSpec{Results: results}
}

const ns, cl = reportsv1alpha1.PolicyScopeNamespaced, reportsv1alpha1.PolicyScopeCluster

type got struct {
	name    string
	summary openreportsv1alpha1.ReportSummary
	subj    []string // result subjects in order
}

func summarize(d []Desired) []got {
	var out []got
	for _, x := range d {
		g := got{name: x.Name, summary: x.Summary}
		for _, r := range x.Results {
			g.subj = append(g.subj, r.Rule+":"+r.Subjects[0].Name)
		}
		out = append(out, g)
	}
	return out
}

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		name  string
		specs []*reportsv1alpha1.ResourceReportSpec
		max   int
		want  []got
	}{{
		name: "no reports give no Reports",
		want: nil,
	}, {
		name: "results of one policy from several resources merge into one sorted Report with a summary",
		specs: []*reportsv1alpha1.ResourceReportSpec{
			spec(result("p", cl, "r", "b", "fail")),
			spec(result("p", cl, "r", "a", "pass")),
			spec(result("p", cl, "r", "c", "warn"), result("p", cl, "q", "c", "error")),
			spec(result("p", cl, "r", "d", "skip")),
		},
		want: []got{{name: "cpol-p", summary: openreportsv1alpha1.ReportSummary{Pass: 1, Fail: 1, Warn: 1, Error: 1, Skip: 1},
			subj: []string{"q:c", "r:a", "r:b", "r:c", "r:d"}}},
	}, {
		name: "a namespaced and a cluster-wide policy of the same name get pol- and cpol- Reports",
		specs: []*reportsv1alpha1.ResourceReportSpec{
			spec(result("p", ns, "r", "a", "fail"), result("p", cl, "r", "a", "pass")),
		},
		want: []got{
			{name: "cpol-p", summary: openreportsv1alpha1.ReportSummary{Pass: 1}, subj: []string{"r:a"}},
			{name: "pol-p", summary: openreportsv1alpha1.ReportSummary{Fail: 1}, subj: []string{"r:a"}},
		},
	}, {
		name: "a result without a scope property counts as cluster-wide",
		specs: []*reportsv1alpha1.ResourceReportSpec{
			spec(openreportsv1alpha1.ReportResult{Policy: "p", Result: "pass", Subjects: []corev1.ObjectReference{{Name: "a"}}}),
		},
		want: []got{{name: "cpol-p", summary: openreportsv1alpha1.ReportSummary{Pass: 1}, subj: []string{":a"}}},
	}, {
		name: "a result without a policy is dropped",
		specs: []*reportsv1alpha1.ResourceReportSpec{
			spec(result("", cl, "r", "a", "fail")),
		},
		want: nil,
	}, {
		name: "more results than the maximum split into numbered parts, each with its own summary",
		specs: []*reportsv1alpha1.ResourceReportSpec{
			spec(result("p", cl, "r", "e", "pass")), spec(result("p", cl, "r", "d", "fail")),
			spec(result("p", cl, "r", "c", "pass")), spec(result("p", cl, "r", "b", "fail")),
			spec(result("p", cl, "r", "a", "pass")),
		},
		max: 2,
		want: []got{
			{name: "cpol-p", summary: openreportsv1alpha1.ReportSummary{Pass: 1, Fail: 1}, subj: []string{"r:a", "r:b"}},
			{name: "cpol-p-part-2", summary: openreportsv1alpha1.ReportSummary{Pass: 1, Fail: 1}, subj: []string{"r:c", "r:d"}},
			{name: "cpol-p-part-3", summary: openreportsv1alpha1.ReportSummary{Pass: 1}, subj: []string{"r:e"}},
		},
	}, {
		name: "a policy named like another's second part gets a distinct Report",
		specs: []*reportsv1alpha1.ResourceReportSpec{
			spec(result("p", cl, "r", "a", "pass"), result("p-part-2", cl, "r", "x", "fail")),
			spec(result("p", cl, "r", "b", "pass")),
		},
		max: 1,
		want: []got{
			{name: "cpol-p", summary: openreportsv1alpha1.ReportSummary{Pass: 1}, subj: []string{"r:a"}},
			{name: "cpol-p-part-2", summary: openreportsv1alpha1.ReportSummary{Pass: 1}, subj: []string{"r:b"}},
			{name: "cpol-p-part-2-" + hash10("cluster/p-part-2/1"), summary: openreportsv1alpha1.ReportSummary{Fail: 1}, subj: []string{"r:x"}},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if g := summarize(Merge(tc.specs, tc.max)); !reflect.DeepEqual(g, tc.want) {
				t.Errorf("Merge:\n got %+v\nwant %+v", g, tc.want)
			}
		})
	}
}

func hash10(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:10]
}

func TestMerge_OutputDoesNotDependOnInputOrder(t *testing.T) {
	var specs []*reportsv1alpha1.ResourceReportSpec
	for i := range 50 {
		specs = append(specs, spec(
			result(fmt.Sprintf("p%d", i%3), cl, fmt.Sprintf("r%d", i%2), fmt.Sprintf("res%02d", i), "fail"),
			result("q", ns, "r", fmt.Sprintf("res%02d", i), "pass"),
		))
	}
	want := Merge(specs, 7)
	for shift := 1; shift < len(specs); shift += 7 {
		rotated := append(append([]*reportsv1alpha1.ResourceReportSpec{}, specs[shift:]...), specs[:shift]...)
		if got := Merge(rotated, 7); !equality.Semantic.DeepEqual(got, want) {
			t.Fatalf("Merge of the same reports in another order differs (shift %d)", shift)
		}
	}
}

func TestReportName_TooLongIsShortenedAndStaysDistinct(t *testing.T) {
	long := strings.Repeat("a", 253)
	a, b := ReportName(cl, long, 1), ReportName(cl, long+"b", 1)
	if a == b {
		t.Fatalf("two long policy names share Report name %s", a)
	}
	for _, n := range []string{a, b, ReportName(ns, long, 12)} {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Errorf("name %q is not a valid object name: %v", n, errs)
		}
	}
}

// A group's policy name (group/<name>) makes a valid Report name, and a policy named like the
// result still gets a Report of its own.
func TestReportName_GroupNamesAreValidAndApartFromADottedPolicy(t *testing.T) {
	name := ReportName(reportsv1alpha1.PolicyScopeCluster, "group/team", 1)
	if errs := validation.IsDNS1123Subdomain(name); len(errs) != 0 {
		t.Fatalf("%s: %v", name, errs)
	}
	d := []Desired{
		{Name: name, Scope: reportsv1alpha1.PolicyScopeCluster, Policy: "group/team", Part: 1},
		{Name: ReportName(reportsv1alpha1.PolicyScopeCluster, "group.team", 1), Scope: reportsv1alpha1.PolicyScopeCluster, Policy: "group.team", Part: 1},
	}
	uniqueNames(d)
	if d[0].Name == d[1].Name {
		t.Errorf("the group and the policy group.team share Report %s", d[0].Name)
	}
}
