package bench

import (
	"os"
	"strconv"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/memlimit"
	"regent.dev/regent/reports/aggregate"
	"regent.dev/regent/test/benchproc"
)

// TestAggregatorProcess is the aggregator child of the benchmark, set up as `regent
// reports-aggregator` sets it up; run without its environment it does nothing.
func TestAggregatorProcess(t *testing.T) {
	env, ok := benchproc.Child(t)
	if !ok {
		return
	}
	cfg := env.Config
	cfg.QPS, cfg.Burst = 50, 100
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.Scheme, Metrics: metricsserver.Options{BindAddress: env.MetricsAddr},
		Controller: config.Controller{UsePriorityQueue: new(bool)}}) // as regent reports-aggregator
	if err != nil {
		t.Fatal(err)
	}
	if err := (&aggregate.Aggregator{Debounce: time.Second}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx := env.Context
	// as `regent reports-aggregator --memory-limit` (unset: adaptive)
	limit, _ := strconv.ParseInt(os.Getenv("REGENT_BENCH_AGGREGATOR_MEMORY_LIMIT"), 10, 64)
	memlimit.Apply(ctx, limit, aggregate.DefaultMemoryLimit)
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	benchproc.WriteHeapProfile(t)
}
