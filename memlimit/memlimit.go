// Package memlimit gives a controller process a soft Go memory limit that follows its live heap.
// Regent's controllers keep small caches next to what their bursts (a propagation, a merge of a
// namespace's reports) allocate and free; under GOGC alone the heap doubles before a collection
// and the peak RSS is mostly garbage.
package memlimit

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Apply sets the process's limit from a flag's value: positive is a fixed limit (as GOMEMLIMIT);
// zero, when GOMEMLIMIT is unset, is the adaptive limit (see adapt) with floor; negative is none.
// The adaptive limit follows the live heap until ctx ends.
func Apply(ctx context.Context, limit, floor int64) {
	switch {
	case limit > 0:
		debug.SetMemoryLimit(limit)
	case limit == 0 && os.Getenv("GOMEMLIMIT") == "":
		adapt(ctx, floor)
	}
}

// liveHeapHeadroom is how far above the live heap the adaptive limit stays: a process whose cache
// outgrows the floor collects when its heap grows by a quarter (as GOGC=25), never
// continuously.
const liveHeapHeadroom = 1.25

// adapt sets the runtime's soft memory limit to max(floor, live heap × 1.25) and keeps
// it there, once a second, until ctx ends; then it restores the previous limit. A fixed limit
// below what a large fleet keeps live would make the collector run without pause.
func adapt(ctx context.Context, floor int64) {
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
