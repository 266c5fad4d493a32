package reports

import (
	"cmp"
	"slices"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

// SortResults orders results by policy, scope, rule, subject, outcome, message, source and
// classification, so the same set of results always serialises to the same bytes and an
// unchanged report is never rewritten.
func SortResults(results []openreportsv1alpha1.ReportResult) {
	slices.SortStableFunc(results, CompareResults)
}

// CompareResults is SortResults' order.
func CompareResults(a, b openreportsv1alpha1.ReportResult) int {
	return cmp.Or(
		cmp.Compare(a.Policy, b.Policy),
		cmp.Compare(ScopeOf(&a), ScopeOf(&b)),
		cmp.Compare(a.Rule, b.Rule),
		slices.CompareFunc(a.Subjects, b.Subjects, compareSubject),
		cmp.Compare(a.Result, b.Result),
		cmp.Compare(a.Description, b.Description),
		cmp.Compare(a.Source, b.Source),
		cmp.Compare(a.Severity, b.Severity),
		cmp.Compare(a.Category, b.Category),
	)
}

func compareSubject(a, b corev1.ObjectReference) int {
	return cmp.Or(
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Name, b.Name),
		cmp.Compare(a.UID, b.UID),
		cmp.Compare(a.Kind, b.Kind),
		cmp.Compare(a.APIVersion, b.APIVersion),
	)
}
