package aggregate_test

import (
	"fmt"
	"testing"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/reports"
	"regent.dev/regent/reports/aggregate"
)

// TestAggregator_ReportResultsKeepTheirSeverityAndCategory: the severity and category producers
// give a policy's results (Kubewarden's annotations) reach the openreports Report as they are,
// and a reclassification reaches it too.
func TestAggregator_ReportResultsKeepTheirSeverityAndCategory(t *testing.T) {
	c := newClient(t)
	ns := createNamespace(t, c, "classified")
	a, b := createConfigMap(t, c, ns.Name, "a"), createConfigMap(t, c, ns.Name, "b")
	pol := clusterPol("psa")
	classify := func(class reports.Classification) {
		t.Helper()
		for _, cm := range []reports.Resource{resourceOf(a, "v1", "ConfigMap"), resourceOf(b, "v1", "ConfigMap")} {
			r := openreportsv1alpha1.ReportResult{Rule: "check", Result: "fail", Description: "fail on " + cm.Name}
			class.Stamp(&r)
			set := []reports.PolicyResults{{Policy: pol, Version: "1-" + string(class.Severity), Results: []openreportsv1alpha1.ReportResult{r}}}
			if _, err := reports.Apply(ctx(t), c, cm, reportsv1alpha1.SourceBackground, set, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	inReport := func(want reports.Classification) {
		t.Helper()
		eventually(t, 30*time.Second, func() (bool, string) {
			var list openreportsv1alpha1.ReportList
			if err := c.List(ctx(t), &list, client.InNamespace(ns.Name), client.MatchingLabels{aggregate.LabelAggregatedBy: aggregate.AggregatorName}); err != nil {
				return false, err.Error()
			}
			var got []string
			for _, r := range list.Items {
				for _, res := range r.Results {
					got = append(got, fmt.Sprintf("%s %s/%s/%s", r.Name, res.Subjects[0].Name, res.Severity, res.Category))
				}
			}
			w := fmt.Sprintf("[cpol-psa a/%s/%s cpol-psa b/%s/%s]", want.Severity, want.Category, want.Severity, want.Category)
			return fmt.Sprint(got) == w, fmt.Sprintf("results %v, want %s", got, w)
		})
	}
	classify(reports.Classification{Severity: "high", Category: "Pod Security"})
	startAggregator(t, aggregate.Shard{}, 0)
	inReport(reports.Classification{Severity: "high", Category: "Pod Security"})
	classify(reports.Classification{Severity: "critical", Category: "Pod Security"})
	inReport(reports.Classification{Severity: "critical", Category: "Pod Security"})
}
