package bench

import (
	"context"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"regent.dev/regent/hub"
)

// Environment of the hub child process.
const (
	envKubeconfig = "REGENT_BENCH_HUB_KUBECONFIG"
	envQPS        = "REGENT_BENCH_HUB_QPS"
	envBurst      = "REGENT_BENCH_HUB_BURST"
	envMetrics    = "REGENT_BENCH_HUB_METRICS"
	envMemLimit   = "REGENT_BENCH_HUB_MEMORY_LIMIT"
	envRoots      = "REGENT_BENCH_HUB_CONCURRENT_ROOTS"
)

// TestHubProcess is the hub child of the benchmark; run without its environment it does nothing.
func TestHubProcess(t *testing.T) {
	kubeconfig := os.Getenv(envKubeconfig)
	if kubeconfig == "" {
		return
	}
	ctrl.SetLogger(logr.Discard())
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	qps, _ := strconv.ParseFloat(os.Getenv(envQPS), 32)
	burst, _ := strconv.Atoi(os.Getenv(envBurst))
	memLimit, _ := strconv.ParseInt(os.Getenv(envMemLimit), 10, 64)
	concurrentRoots, _ := strconv.Atoi(os.Getenv(envRoots))
	// A CPU profile of the hub from start to SIGTERM; a restarted hub writes <path>.2.
	if path := os.Getenv("REGENT_BENCH_CPU_PROFILE"); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if os.IsExist(err) {
			f, err = os.Create(path + ".2")
		}
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := hub.Run(ctx, hub.Options{Config: cfg, QPS: float32(qps), Burst: burst, MetricsBindAddress: os.Getenv(envMetrics), MemoryLimit: memLimit, ConcurrentRoots: concurrentRoots}); err != nil {
		t.Fatal(err)
	}
	// A heap profile of the hub at the end of the run, to see what its memory holds.
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
