package bench

import (
	"context"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/memlimit"
	"regent.dev/regent/reports/aggregate"
)

// Environment of the aggregator child process.
const (
	envKubeconfig = "REGENT_BENCH_AGGREGATOR_KUBECONFIG"
	envMetrics    = "REGENT_BENCH_AGGREGATOR_METRICS"
)

// TestAggregatorProcess is the aggregator child of the benchmark, set up as `regent
// reports-aggregator` sets it up; run without its environment it does nothing.
func TestAggregatorProcess(t *testing.T) {
	kubeconfig := os.Getenv(envKubeconfig)
	if kubeconfig == "" {
		return
	}
	ctrl.SetLogger(logr.Discard())
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.Scheme, Metrics: metricsserver.Options{BindAddress: os.Getenv(envMetrics)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&aggregate.Aggregator{Debounce: time.Second}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	// as `regent reports-aggregator --memory-limit` (unset: adaptive)
	limit, _ := strconv.ParseInt(os.Getenv("REGENT_BENCH_AGGREGATOR_MEMORY_LIMIT"), 10, 64)
	memlimit.Apply(ctx, limit, aggregate.DefaultMemoryLimit)
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// What the aggregator's memory held and allocated over the run.
	if path := os.Getenv("REGENT_BENCH_HEAP_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.WriteHeapProfile(f); err != nil {
			t.Fatal(err)
		}
	}
}
