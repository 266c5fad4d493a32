package hub

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// DefaultMemoryLimit is the floor of the soft memory limit a hub gives itself when Options name
// none and GOMEMLIMIT is unset. Measured (hub/BENCHMARKS.md): 1,000 clusters × 10 roots keep
// ~30 MB live at the end of a propagation; under GOGC alone the heap doubles that before a
// collection, with the limit the hub peaks at ~82 MiB RSS instead of 126–160, in the same time.
const DefaultMemoryLimit = 48 << 20

// liveHeapHeadroom is how far above the live heap the adaptive limit stays: a hub whose cache
// outgrows DefaultMemoryLimit collects when its heap grows by a quarter (as GOGC=25), never
// continuously.
const liveHeapHeadroom = 1.25

// adaptMemoryLimit sets the runtime's soft memory limit to max(floor, live heap × 1.25) and keeps
// it there, once a second, until ctx ends; then it restores the previous limit. A fixed limit
// below what a large fleet keeps live would make the collector run without pause.
func adaptMemoryLimit(ctx context.Context, floor int64) {
	previous := debug.SetMemoryLimit(-1)
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	set := func() {
		metrics.Read(samples)
		limit := floor
		if samples[0].Value.Kind() == metrics.KindUint64 {
			limit = max(limit, int64(float64(samples[0].Value.Uint64())*liveHeapHeadroom))
		}
		debug.SetMemoryLimit(limit)
	}
	set()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				debug.SetMemoryLimit(previous)
				return
			case <-t.C:
				set()
			}
		}
	}()
}
