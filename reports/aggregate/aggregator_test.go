package aggregate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/reports/aggregate"
)

func TestAggregator_MergesPerNamespaceAndPolicyWithSummaries(t *testing.T) {
	c := newClient(t)
	ns1, ns2 := createNamespace(t, c, "merge"), createNamespace(t, c, "merge")
	a, b := createConfigMap(t, c, ns1.Name, "a"), createConfigMap(t, c, ns1.Name, "b")
	cm := createConfigMap(t, c, ns2.Name, "c")
	// ClusterReports are shared by the package's tests: a policy name of this test's own
	owner := "owner-" + ns1.Name
	record(t, c, resourceOf(a, "v1", "ConfigMap"), clusterPol("must-label"), "fail")
	record(t, c, resourceOf(a, "v1", "ConfigMap"), nsPol("must-label"), "pass")
	record(t, c, resourceOf(b, "v1", "ConfigMap"), clusterPol("must-label"), "pass")
	record(t, c, resourceOf(cm, "v1", "ConfigMap"), clusterPol("must-label"), "warn")
	// cluster-scoped resources aggregate into ClusterReports
	record(t, c, resourceOf(ns1, "v1", "Namespace"), clusterPol(owner), "error")
	record(t, c, resourceOf(ns2, "v1", "Namespace"), clusterPol(owner), "skip")

	startAggregator(t, aggregate.Shard{}, 0)

	waitFor(t, c, ns1.Name,
		summary{Name: "cpol-must-label", Summary: openreportsv1alpha1.ReportSummary{Pass: 1, Fail: 1},
			Results: []string{"must-label/fail/a", "must-label/pass/b"}},
		summary{Name: "pol-must-label", Summary: openreportsv1alpha1.ReportSummary{Pass: 1},
			Results: []string{"must-label/pass/a"}})
	waitFor(t, c, ns2.Name,
		summary{Name: "cpol-must-label", Summary: openreportsv1alpha1.ReportSummary{Warn: 1}, Results: []string{"must-label/warn/c"}})
	// results are sorted by subject: here the generated namespace names
	clusterResults := []string{owner + "/error/" + ns1.Name, owner + "/skip/" + ns2.Name}
	if ns2.Name < ns1.Name {
		clusterResults[0], clusterResults[1] = clusterResults[1], clusterResults[0]
	}
	waitForClusterReport(t, c,
		summary{Name: "cpol-" + owner, Summary: openreportsv1alpha1.ReportSummary{Error: 1, Skip: 1}, Results: clusterResults})
}

func TestAggregator_DeletedResourceLosesItsReportAndItsResults(t *testing.T) {
	c := newClient(t)
	ns := createNamespace(t, c, "gc").Name
	a, b := createConfigMap(t, c, ns, "a"), createConfigMap(t, c, ns, "b")
	record(t, c, resourceOf(a, "v1", "ConfigMap"), clusterPol("p"), "fail")
	record(t, c, resourceOf(b, "v1", "ConfigMap"), clusterPol("p"), "pass")

	// the report is named by the resource's UID and owned by it
	var rr reportsv1alpha1.ResourceReport
	if err := c.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: string(a.UID)}, &rr); err != nil {
		t.Fatalf("report of a by its UID: %v", err)
	}
	if len(rr.OwnerReferences) != 1 || rr.OwnerReferences[0].UID != a.UID {
		t.Fatalf("report owners %+v, want the ConfigMap a", rr.OwnerReferences)
	}

	startAggregator(t, aggregate.Shard{}, 0)
	waitFor(t, c, ns, summary{Name: "cpol-p", Summary: openreportsv1alpha1.ReportSummary{Pass: 1, Fail: 1},
		Results: []string{"p/fail/a", "p/pass/b"}})

	// kube-controller-manager's garbage collector deletes the report with the resource, and the
	// aggregator drops its result
	if err := c.Delete(ctx(t), a); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		err := c.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: string(a.UID)}, &reportsv1alpha1.ResourceReport{})
		return apierrors.IsNotFound(err), fmt.Sprintf("report of deleted ConfigMap a still there (get: %v)", err)
	})
	waitFor(t, c, ns, summary{Name: "cpol-p", Summary: openreportsv1alpha1.ReportSummary{Pass: 1}, Results: []string{"p/pass/b"}})

	// with the last resource gone the Report should no longer exist, so it is deleted; a Report
	// someone else wrote (no ownership label) is left alone
	foreign := &openreportsv1alpha1.Report{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cpol-foreign"}, Source: "kyverno"}
	if err := c.Create(ctx(t), foreign); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, ns)
	if err := c.Get(ctx(t), client.ObjectKeyFromObject(foreign), foreign); err != nil {
		t.Errorf("a Report the aggregator does not own: %v", err)
	}
}

func TestAggregator_UnchangedReportIsNotWritten(t *testing.T) {
	c := newClient(t)
	ns := createNamespace(t, c, "nowrite").Name
	a, b := createConfigMap(t, c, ns, "a"), createConfigMap(t, c, ns, "b")
	record(t, c, resourceOf(a, "v1", "ConfigMap"), clusterPol("p"), "fail")
	var before reportsv1alpha1.ResourceReport
	if err := c.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: string(a.UID)}, &before); err != nil {
		t.Fatal(err)
	}
	if recordAt(t, c, resourceOf(a, "v1", "ConfigMap"), clusterPol("p"), "fail", "1") {
		t.Error("reports.Apply of the same results said it wrote")
	}
	// reconciled directly, without a manager, so the test knows exactly when merges happen; the
	// apiserver keeps the resourceVersion on a no-op update, so the writes are counted too
	writes := 0
	cw, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	counting := interceptor.NewClient(cw, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			writes++
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			writes++
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			writes++
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			writes++
			return c.Delete(ctx, obj, opts...)
		},
	})
	agg := &aggregate.Aggregator{Client: counting}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns}}
	reconcileOnce := func() string {
		t.Helper()
		if _, err := agg.Reconcile(ctx(t), req); err != nil {
			t.Fatal(err)
		}
		var r openreportsv1alpha1.Report
		if err := c.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: "cpol-p"}, &r); err != nil {
			t.Fatal(err)
		}
		return r.ResourceVersion
	}
	first := reconcileOnce()
	if writes != 1 {
		t.Fatalf("first merge made %d writes, want 1 (create)", writes)
	}
	if again := reconcileOnce(); again != first || writes != 1 {
		t.Errorf("merging unchanged reports rewrote the Report: resourceVersion %s → %s, %d writes", first, again, writes)
	}
	// a new policy version with the same results changes the per-resource report, not the Report
	if !recordAt(t, c, resourceOf(a, "v1", "ConfigMap"), clusterPol("p"), "fail", "2") {
		t.Error("reports.Apply of a new policy version said it did not write")
	}
	var rr reportsv1alpha1.ResourceReport
	if err := c.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: string(a.UID)}, &rr); err != nil || rr.Labels["cpol.reports.regent.dev/p"] != "2" {
		t.Fatalf("per-resource report not at policy version 2: %v %v", rr.Labels, err)
	}
	if rr.ResourceVersion == before.ResourceVersion {
		t.Fatalf("per-resource report not rewritten at policy version 2")
	}
	if again := reconcileOnce(); again != first || writes != 1 {
		t.Errorf("a report change that leaves the results alone rewrote the Report: %s → %s, %d writes", first, again, writes)
	}
	// and a real change is written
	record(t, c, resourceOf(b, "v1", "ConfigMap"), clusterPol("p"), "pass")
	if changed := reconcileOnce(); changed == first || writes != 2 {
		t.Errorf("a new result did not update the Report once (%d writes)", writes)
	}
	waitFor(t, c, ns, summary{Name: "cpol-p", Summary: openreportsv1alpha1.ReportSummary{Pass: 1, Fail: 1},
		Results: []string{"p/fail/a", "p/pass/b"}})
}

func TestAggregator_TwoShardsWriteExactlyWhatOneDoes(t *testing.T) {
	c := newClient(t)
	shards := []aggregate.Shard{{Index: 0, Count: 2}, {Index: 1, Count: 2}}
	// namespaces with generated names, until each shard owns at least two
	var names []string
	owned := make([]int, len(shards))
	for i := 0; len(names) < 6 || owned[0] < 2 || owned[1] < 2; i++ {
		ns := createNamespace(t, c, "shard").Name
		names = append(names, ns)
		for k, s := range shards {
			if s.Owns(ns) {
				owned[k]++
			}
		}
		for j := range i%3 + 1 {
			cm := createConfigMap(t, c, ns, fmt.Sprintf("cm-%d", j))
			record(t, c, resourceOf(cm, "v1", "ConfigMap"), clusterPol("p"), []openreportsv1alpha1.Result{"pass", "fail"}[j%2])
			record(t, c, resourceOf(cm, "v1", "ConfigMap"), nsPol(fmt.Sprintf("q%d", i%2)), "warn")
		}
	}

	// what one aggregator writes, merged namespace by namespace
	one := &aggregate.Aggregator{Client: c}
	want := map[string][]summary{}
	for _, ns := range names {
		if _, err := one.Reconcile(ctx(t), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
		want[ns] = aggregated(t, c, ns)
		if len(want[ns]) == 0 {
			t.Fatalf("one aggregator wrote nothing in %s", ns)
		}
		if err := c.DeleteAllOf(ctx(t), &openreportsv1alpha1.Report{}, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, c, ns)
	}

	// shard 0 alone writes its namespaces and only those
	startAggregator(t, shards[0], 0)
	for _, ns := range names {
		if shards[0].Owns(ns) {
			waitFor(t, c, ns, want[ns]...)
		}
	}
	for _, ns := range names {
		if !shards[0].Owns(ns) {
			if got := aggregated(t, c, ns); len(got) > 0 {
				t.Errorf("shard 0/2 wrote in %s, which shard 1/2 owns: %v", ns, got)
			}
		}
	}
	// with shard 1 the cluster ends exactly where one aggregator put it
	startAggregator(t, shards[1], 0)
	for _, ns := range names {
		waitFor(t, c, ns, want[ns]...)
	}
}

func TestAggregator_SplitsAReportPastMaxResultsAndShrinksItBack(t *testing.T) {
	c := newClient(t)
	ns := createNamespace(t, c, "split").Name
	var cms []*corev1.ConfigMap
	for i := range 7 {
		cm := createConfigMap(t, c, ns, fmt.Sprintf("cm-%d", i))
		cms = append(cms, cm)
		record(t, c, resourceOf(cm, "v1", "ConfigMap"), clusterPol("p"), "fail")
	}
	startAggregator(t, aggregate.Shard{}, 3)
	waitFor(t, c, ns,
		summary{Name: "cpol-p", Summary: openreportsv1alpha1.ReportSummary{Fail: 3}, Results: []string{"p/fail/cm-0", "p/fail/cm-1", "p/fail/cm-2"}},
		summary{Name: "cpol-p-part-2", Summary: openreportsv1alpha1.ReportSummary{Fail: 3}, Results: []string{"p/fail/cm-3", "p/fail/cm-4", "p/fail/cm-5"}},
		summary{Name: "cpol-p-part-3", Summary: openreportsv1alpha1.ReportSummary{Fail: 1}, Results: []string{"p/fail/cm-6"}})

	for _, cm := range cms[2:] {
		if err := c.Delete(ctx(t), cm); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, c, ns,
		summary{Name: "cpol-p", Summary: openreportsv1alpha1.ReportSummary{Fail: 2}, Results: []string{"p/fail/cm-0", "p/fail/cm-1"}})
}

// A namespace is read a page at a time (500 reports); every page's results reach the Report.
func TestAggregator_ReadsANamespaceLargerThanAPage(t *testing.T) {
	c := newClient(t)
	ns := createNamespace(t, c, "paged").Name
	const n = 503
	for i := range n {
		cm := createConfigMap(t, c, ns, fmt.Sprintf("cm-%03d", i))
		record(t, c, resourceOf(cm, "v1", "ConfigMap"), clusterPol("p"), []openreportsv1alpha1.Result{"pass", "fail"}[i%2])
	}
	startAggregator(t, aggregate.Shard{}, 0)
	eventually(t, time.Minute, func() (bool, string) {
		got := aggregated(t, c, ns)
		if len(got) != 1 || len(got[0].Results) != n {
			return false, fmt.Sprintf("want one Report of %d results, got %d Reports", n, len(got))
		}
		want := openreportsv1alpha1.ReportSummary{Pass: (n + 1) / 2, Fail: n / 2}
		return got[0].Summary == want, fmt.Sprintf("summary %+v, want %+v", got[0].Summary, want)
	})
}
