package benchproc

import (
	"context"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"syscall"
)

// CPUProfileWindows lets a run's operator profile a phase of a long child rather than all of it:
// while ctx lasts, each SIGUSR1 to the child starts a CPU profile to $REGENT_BENCH_CPU_WINDOW.<n>
// (n counting from 1) and the next one stops it. A ProgressivePerGroup run at 150,000 replicas
// spends its first eight minutes creating replicas; the turns after them are what needs a profile.
func CPUProfileWindows(ctx context.Context) {
	path := os.Getenv("REGENT_BENCH_CPU_WINDOW")
	if path == "" {
		return
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGUSR1)
	go func() {
		defer signal.Stop(signals)
		var open *os.File
		n := 0
		stop := func() {
			if open != nil {
				pprof.StopCPUProfile()
				_ = open.Close()
				open = nil
			}
		}
		defer stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-signals:
			}
			if open != nil {
				stop()
				continue
			}
			n++
			f, err := os.Create(path + "." + strconv.Itoa(n))
			if err != nil {
				continue
			}
			if pprof.StartCPUProfile(f) != nil {
				_ = f.Close()
				continue
			}
			open = f
		}
	}()
}
