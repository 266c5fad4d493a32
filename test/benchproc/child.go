package benchproc

import (
	"context"
	"os"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
)

// ChildEnv is what a child gets from its parent.
type ChildEnv struct {
	// Config is the kubeconfig's, with client-go's default rate limits.
	Config *rest.Config
	// MetricsAddr is where the child serves /metrics.
	MetricsAddr string
	// Context ends when the parent asks the child to stop.
	Context context.Context
}

// Child is a child test function's start: ok is false when the test runs without a parent (then
// it must return at once). Logs are discarded: the parent measures, it does not read.
func Child(t *testing.T) (env ChildEnv, ok bool) {
	kubeconfig := os.Getenv(envKubeconfig)
	if kubeconfig == "" {
		return env, false
	}
	ctrl.SetLogger(logr.Discard())
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	t.Cleanup(stop)
	return ChildEnv{Config: cfg, MetricsAddr: os.Getenv(envMetrics), Context: ctx}, true
}

// WriteHeapProfile writes the child's heap profile, after a collection, to
// $REGENT_BENCH_HEAP_PROFILE when it is set: what the process's memory held at the end of the run.
func WriteHeapProfile(t *testing.T) {
	path := os.Getenv("REGENT_BENCH_HEAP_PROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Fatal(err)
	}
}

// WritePeakHeapProfiles writes, while ctx lasts, a heap profile to $REGENT_BENCH_PEAK_HEAP_PROFILE
// (with the process id appended, so a restarted child keeps its own) each time the live heap
// passes its highest yet by a sixteenth: the last one written holds what the peak was made of,
// which a profile at the end of the run (WriteHeapProfile) no longer shows.
func WritePeakHeapProfiles(ctx context.Context) {
	path := os.Getenv("REGENT_BENCH_PEAK_HEAP_PROFILE")
	if path == "" {
		return
	}
	path += "." + strconv.Itoa(os.Getpid())
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	go func() {
		var highest uint64
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			metrics.Read(samples)
			live := samples[0].Value.Uint64()
			if live <= highest+highest/16 {
				continue
			}
			highest = live
			if f, err := os.Create(path); err == nil {
				_ = pprof.WriteHeapProfile(f)
				_ = f.Close()
			}
		}
	}()
}
