package aggregate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/reports"
	"regent.dev/regent/reports/aggregate"
)

var (
	eventually = fleettest.Eventually
	clusterPol = func(name string) reports.PolicyRef {
		return reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeCluster, Name: name}
	}
	nsPol = func(name string) reports.PolicyRef {
		return reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeNamespaced, Name: name}
	}
)

func newClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// createNamespace creates a namespace named prefix and a generated suffix: the package's tests
// share one apiserver, also when run with -count.
func createNamespace(t *testing.T, c client.Client, prefix string) *corev1.Namespace {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(ctx(t), ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

func createConfigMap(t *testing.T, c client.Client, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Create(ctx(t), cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

// resourceOf is what a producer knows about the object it evaluated.
func resourceOf(obj client.Object, apiVersion, kind string) reports.Resource {
	return reports.Resource{APIVersion: apiVersion, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
}

// record writes one result of policy p for res, as a producer does.
func record(t *testing.T, c client.Client, res reports.Resource, p reports.PolicyRef, outcome openreportsv1alpha1.Result) {
	t.Helper()
	recordAt(t, c, res, p, outcome, "1")
}

// recordAt is record for the policy at version.
func recordAt(t *testing.T, c client.Client, res reports.Resource, p reports.PolicyRef, outcome openreportsv1alpha1.Result, version string) (changed bool) {
	t.Helper()
	set := []reports.PolicyResults{{Policy: p, Version: version, Results: []openreportsv1alpha1.ReportResult{{Rule: "check", Result: outcome, Description: string(outcome) + " on " + res.Name}}}}
	changed, err := reports.Apply(ctx(t), c, res, reportsv1alpha1.SourceBackground, set, nil)
	if err != nil {
		t.Fatal(err)
	}
	return changed
}

// startAggregator runs an aggregator with a short debounce until the test ends.
func startAggregator(t *testing.T, shard aggregate.Shard, maxResults int) {
	t.Helper()
	skip := true
	mgr, err := ctrl.NewManager(cluster.Config, ctrl.Options{
		Scheme:     scheme.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: &skip, UsePriorityQueue: new(bool)}, // no priority queue: controller-runtime#3538
	})
	if err != nil {
		t.Fatal(err)
	}
	a := &aggregate.Aggregator{Shard: shard, Debounce: 50 * time.Millisecond, MaxResults: maxResults}
	if err := a.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	fleettest.StartManager(t, mgr)
}

// summary is a Report as the tests compare it: its name, summary and results in order.
type summary struct {
	Name    string
	Summary openreportsv1alpha1.ReportSummary
	Results []string // "<policy>/<result>/<subject name>"
}

func (s summary) String() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// aggregated lists the aggregator's Reports of ns ("" for ClusterReports) as summaries, by name.
func aggregated(t *testing.T, c client.Client, ns string) []summary {
	t.Helper()
	mine := client.MatchingLabels{aggregate.LabelAggregatedBy: aggregate.AggregatorName}
	var out []summary
	add := func(name string, s openreportsv1alpha1.ReportSummary, results []openreportsv1alpha1.ReportResult) {
		x := summary{Name: name, Summary: s}
		for _, r := range results {
			x.Results = append(x.Results, fmt.Sprintf("%s/%s/%s", r.Policy, r.Result, r.Subjects[0].Name))
		}
		out = append(out, x)
	}
	if ns == "" {
		var list openreportsv1alpha1.ClusterReportList
		if err := c.List(ctx(t), &list, mine); err != nil {
			t.Fatal(err)
		}
		for _, r := range list.Items {
			add(r.Name, r.Summary, r.Results)
		}
	} else {
		var list openreportsv1alpha1.ReportList
		if err := c.List(ctx(t), &list, client.InNamespace(ns), mine); err != nil {
			t.Fatal(err)
		}
		for _, r := range list.Items {
			add(r.Name, r.Summary, r.Results)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// waitFor polls until the aggregator's Reports of ns are want.
func waitFor(t *testing.T, c client.Client, ns string, want ...summary) {
	t.Helper()
	wantS := fmt.Sprint(want)
	eventually(t, 30*time.Second, func() (bool, string) {
		got := fmt.Sprint(aggregated(t, c, ns))
		return got == wantS, fmt.Sprintf("reports in %q:\n got %s\nwant %s", ns, got, wantS)
	})
}

// waitForClusterReport polls until the aggregator's ClusterReport want.Name is want; other
// ClusterReports belong to other tests.
func waitForClusterReport(t *testing.T, c client.Client, want summary) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, string) {
		for _, got := range aggregated(t, c, "") {
			if got.Name == want.Name {
				return got.String() == want.String(), fmt.Sprintf("ClusterReport:\n got %s\nwant %s", got, want)
			}
		}
		return false, "no ClusterReport " + want.Name
	})
}
