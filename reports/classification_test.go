package reports

import (
	"testing"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
)

func TestClassify_ReadsKubewardensAnnotationsAsItsAuditScannerDoes(t *testing.T) {
	const sev, cat = "io.kubewarden.policy.severity", "io.kubewarden.policy.category"
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		monitor     bool
		want        Classification
		invalid     string
	}{
		{name: "no annotations: no severity, no category"},
		{name: "both carried", annotations: map[string]string{sev: "high", cat: "Pod Security"},
			want: Classification{Severity: "high", Category: "Pod Security"}},
		{name: "every severity openreports knows", annotations: map[string]string{sev: "critical"}, want: Classification{Severity: "critical"}},
		{name: "info", annotations: map[string]string{sev: "info"}, want: Classification{Severity: "info"}},
		{name: "case and spaces do not matter", annotations: map[string]string{sev: " Medium "}, want: Classification{Severity: "medium"}},
		{name: "category alone", annotations: map[string]string{cat: "Resource validation"}, want: Classification{Category: "Resource validation"}},
		{name: "monitor mode is info whatever the annotation", annotations: map[string]string{sev: "critical", cat: "PSP"}, monitor: true,
			want: Classification{Severity: "info", Category: "PSP"}},
		{name: "monitor mode without annotations is info", monitor: true, want: Classification{Severity: "info"}},
		{name: "an unknown severity is left out and reported", annotations: map[string]string{sev: "urgent", cat: "x"},
			want: Classification{Category: "x"}, invalid: "urgent"},
		{name: "an empty severity is unknown", annotations: map[string]string{sev: ""}, invalid: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, invalid := Classify(tc.annotations, tc.monitor)
			if got != tc.want || invalid != tc.invalid {
				t.Errorf("Classify(%v, monitor %v) = %+v, %q; want %+v, %q", tc.annotations, tc.monitor, got, invalid, tc.want, tc.invalid)
			}
		})
	}
}

func TestVersion_GenerationAloneWithoutTheAnnotationsAndChangesWithEither(t *testing.T) {
	const sev, cat = "io.kubewarden.policy.severity", "io.kubewarden.policy.category"
	for _, a := range []map[string]string{nil, {"other": "x"}} {
		if v := Version("3", a); v != "3" {
			t.Errorf("Version(3, %v) = %q, want the generation alone: reports written before classification stay current", a, v)
		}
	}
	seen := map[string]map[string]string{}
	for _, a := range []map[string]string{nil, {sev: "high"}, {sev: "low"}, {cat: "high"}, {sev: ""}, {cat: ""},
		{sev: "high", cat: "a"}, {sev: "high", cat: "b"}, {sev: "high\ncategory=b"}} {
		v := Version("3", a)
		if other, dup := seen[v]; dup {
			t.Errorf("%v and %v share version %q: a changed annotation would not mark reports stale", a, other, v)
		}
		seen[v] = a
		if reportsv1alpha1.LabelSafe(v) != v {
			t.Errorf("version %q is not a label value as is", v)
		}
		if again := Version("3", a); again != v {
			t.Errorf("version of %v not stable: %q then %q", a, v, again)
		}
	}
	if Version("3", map[string]string{sev: "high"}) == Version("4", map[string]string{sev: "high"}) {
		t.Error("a new generation must give a new version")
	}
}

func TestDesired_KeepsEachResultsClassification(t *testing.T) {
	res := Resource{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "p", UID: "u1"}
	r := openreportsv1alpha1.ReportResult{Result: "fail", Source: "regent"}
	Classification{Severity: "high", Category: "Pod Security"}.Stamp(&r)
	out := Desired(nil, res, reportsv1alpha1.SourceBackground, []PolicyResults{{
		Policy: PolicyRef{Scope: reportsv1alpha1.PolicyScopeCluster, Name: "psa"}, Version: "2-x", Results: []openreportsv1alpha1.ReportResult{r}}}, nil)
	got := out.ReportSpec().Results
	if len(got) != 1 || got[0].Severity != "high" || got[0].Category != "Pod Security" {
		t.Errorf("results %+v, want severity high and category Pod Security kept", got)
	}
}
