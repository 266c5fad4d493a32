package opa

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/fleet/fleettest"
)

// benchSize reads a size from the environment (smaller runs on a loaded machine), def otherwise.
func benchSize(b *testing.B, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		return n
	}
	return def
}

// BenchmarkLabelChangeToDecisions measures, on a real hub with the webhook, the remediator and
// OCM's placement controller, the time from one ManagedCluster label change (an EU cluster's PCI
// level drops to 1, then comes back) to every PCI Placement's PlacementDecisions reflecting it.
// REGENT_BENCH_CLUSTERS (default 1000) and REGENT_BENCH_PLACEMENTS (default 100) set the size.
func BenchmarkLabelChangeToDecisions(b *testing.B) {
	clusters := benchSize(b, "REGENT_BENCH_CLUSTERS", 1000)
	placements := benchSize(b, "REGENT_BENCH_PLACEMENTS", 100)
	e := startPlacementEnv(b, AdmissionOptions{}, true)
	e.create(&clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: clusterSet}})
	eligible := 0
	for i := 0; i < clusters; i++ {
		region, level := []string{"eu", "us"}[i%2], 1+(i/2)%3
		if region == "eu" && level >= 2 {
			eligible++
		}
		e.create(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c-%05d", i), Labels: map[string]string{
			"region": region, "pci-level": strconv.Itoa(level), clusterv1beta2.ClusterSetLabel: clusterSet}},
			Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}})
	}
	e.namespace("payments", map[string]string{"compliance": "pci"})
	e.policy("eu-pci", euPCIPolicy)
	for i := 0; i < placements; i++ {
		e.create(newPlacement("payments", fmt.Sprintf("pl-%03d", i)))
	}
	if _, err := e.f.StartPlacementController(""); err != nil {
		b.Fatal(err)
	}
	// Every Placement holds every eligible cluster (no numberOfClusters) once the controller has
	// caught up; the moved cluster is c-00002 (eu, PCI 2).
	const moved = "c-00002"
	holding := func() (withMoved, complete int) {
		list := &clusterv1beta1.PlacementDecisionList{}
		if err := e.admin.List(e.ctx, list, client.InNamespace("payments")); err != nil {
			b.Fatal(err)
		}
		per := map[string]int{}
		for _, d := range list.Items {
			pl := d.Labels[clusterv1beta1.PlacementLabel]
			for _, c := range d.Status.Decisions {
				per[pl]++
				if c.ClusterName == moved {
					withMoved++
				}
			}
		}
		for _, n := range per {
			if n == eligible {
				complete++
			}
		}
		return withMoved, complete
	}
	waitFor := func(wantWithMoved, wantComplete int, timeout time.Duration) {
		fleettest.Eventually(b, timeout, func() (bool, string) {
			w, c := holding()
			return w == wantWithMoved && c == wantComplete, fmt.Sprintf("%d Placements hold %s (want %d), %d hold all %d eligible clusters (want %d)", w, moved, wantWithMoved, c, eligible, wantComplete)
		})
	}
	waitFor(placements, placements, 5*time.Minute)

	passesBefore, passSecondsBefore := histogramTotals(b, remediationPassSeconds)
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		e.relabel(moved, "pci-level", "1")
		waitFor(0, 0, 2*time.Minute)
		e.relabel(moved, "pci-level", "2")
		waitFor(placements, placements, 2*time.Minute)
		total += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(total.Milliseconds())/float64(2*b.N), "ms/label-change")
	// Regent's share: the remediator's passes during the label changes (the rest is OCM's
	// controller and the apiserver).
	passes, passSeconds := histogramTotals(b, remediationPassSeconds)
	if n := passes - passesBefore; n > 0 {
		b.ReportMetric((passSeconds-passSecondsBefore)*1000/float64(n), "ms/remediation-pass")
		b.ReportMetric(float64(n)/float64(2*b.N), "passes/label-change")
	}
}

func histogramTotals(b *testing.B, h prometheus.Histogram) (count uint64, sum float64) {
	m := &dto.Metric{}
	if err := h.Write(m); err != nil {
		b.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}
