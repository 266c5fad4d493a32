package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/reports"
)

func TestReportsAggregator_RejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--shard", "2/2"},
		{"--shard", "x"},
		{"--max-results-per-report", "0"},
		{"--debounce", "-1s"},
	} {
		root := newRootCommand()
		root.SetArgs(append([]string{"reports-aggregator", "--kubeconfig", "/does/not/exist"}, args...))
		err := root.Execute()
		if err == nil || strings.Contains(err.Error(), "/does/not/exist") {
			t.Errorf("%v: want a flag error before the kubeconfig is read, got %v", args, err)
		}
	}
}

func TestReportsAggregator_MergesTheClustersReports(t *testing.T) {
	hub := fleettest.Hub(t)
	c, err := client.New(hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		root := newRootCommand()
		root.SetArgs([]string{"reports-aggregator", "--kubeconfig", hub.Kubeconfig, "--shard", "0/1",
			"--debounce", "50ms", "--max-results-per-report", "10", "--metrics-bind-address", "0"})
		done <- root.ExecuteContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("reports-aggregator: %v", err)
		}
	})

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	res := reports.Resource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "settings", UID: cm.UID}
	set := []reports.PolicyResults{{Policy: reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeCluster, Name: "must-label"},
		Version: "1", Results: []openreportsv1alpha1.ReportResult{{Rule: "labels", Result: "fail"}}}}
	if _, err := reports.Apply(ctx, c, res, reportsv1alpha1.SourceAdmission, set, nil); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, 30*time.Second, func() (bool, string) {
		var r openreportsv1alpha1.Report
		err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "cpol-must-label"}, &r)
		return err == nil && r.Summary.Fail == 1, fmt.Sprintf("Report default/cpol-must-label with one failure (%v, %+v)", err, r.Summary)
	})
}
