package bench

import (
	"net/http"
	"os"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"regent.dev/regent/hub"
	"regent.dev/regent/test/benchproc"
)

// Environment of the hub child process.
const (
	envQPS      = "REGENT_BENCH_HUB_QPS"
	envBurst    = "REGENT_BENCH_HUB_BURST"
	envMemLimit = "REGENT_BENCH_HUB_MEMORY_LIMIT"
	envRoots    = "REGENT_BENCH_HUB_CONCURRENT_ROOTS"
	// envStatusInterval is the hub's --root-status-interval, a Go duration.
	envStatusInterval = "REGENT_BENCH_HUB_ROOT_STATUS_INTERVAL"
)

// TestHubProcess is the hub child of the benchmark; run without its environment it does nothing.
func TestHubProcess(t *testing.T) {
	env, ok := benchproc.Child(t)
	if !ok {
		return
	}
	qps, _ := strconv.ParseFloat(os.Getenv(envQPS), 32)
	burst, _ := strconv.Atoi(os.Getenv(envBurst))
	memLimit, _ := strconv.ParseInt(os.Getenv(envMemLimit), 10, 64)
	concurrentRoots, _ := strconv.Atoi(os.Getenv(envRoots))
	var statusInterval time.Duration
	if v := os.Getenv(envStatusInterval); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s: %v", envStatusInterval, err)
		}
		statusInterval = d
	}
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
	if path := os.Getenv("REGENT_BENCH_HUB_WATCH_LOG"); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		env.Config.Wrap(func(next http.RoundTripper) http.RoundTripper { return &watchLog{next: next, out: f} })
	}
	benchproc.WritePeakHeapProfiles(env.Context)
	benchproc.CPUProfileWindows(env.Context)
	if err := hub.Run(env.Context, hub.Options{Config: env.Config, QPS: float32(qps), Burst: burst, MetricsBindAddress: env.MetricsAddr, MemoryLimit: memLimit, ConcurrentRoots: concurrentRoots,
		RootStatusInterval: statusInterval}); err != nil {
		t.Fatal(err)
	}
	benchproc.WriteHeapProfile(t)
}
