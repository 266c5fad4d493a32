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
	"strconv"
	"strings"
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

// containerShare is the part of its container's memory limit a process lets its Go heap reach:
// the rest is its binary's pages (~40 MiB of a Regent binary are file-backed and charged to the
// container), stacks and the runtime's own.
const containerShare = 0.85

// adapt sets the runtime's soft memory limit to max(floor, live heap × 1.25), but never above
// containerShare of the container's memory limit, and keeps it there, once a second, until ctx
// ends; then it restores the previous limit. A fixed limit below what a large fleet keeps live
// would make the collector run without pause; in a container, collecting harder near its limit
// is better than being killed at it.
func adapt(ctx context.Context, floor int64) {
	previous := debug.SetMemoryLimit(-1)
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	ceiling := int64(float64(containerLimit()) * containerShare)
	set := func() {
		metrics.Read(samples)
		var live uint64
		if samples[0].Value.Kind() == metrics.KindUint64 {
			live = samples[0].Value.Uint64()
		}
		debug.SetMemoryLimit(adaptiveLimit(live, floor, ceiling))
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

// adaptiveLimit is max(floor, live × liveHeapHeadroom), capped at ceiling when ceiling is
// positive.
func adaptiveLimit(live uint64, floor, ceiling int64) int64 {
	limit := max(floor, int64(float64(live)*liveHeapHeadroom))
	if ceiling > 0 {
		limit = min(limit, ceiling)
	}
	return limit
}

// containerLimit is the memory limit of the process's cgroup (v2 memory.max, else v1
// memory.limit_in_bytes); 0 when it has none or it cannot be read.
func containerLimit() int64 {
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// "max" (v2) or a huge number (v1) mean no limit.
		n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		if err != nil || n <= 0 || n >= 1<<60 {
			return 0
		}
		return n
	}
	return 0
}
