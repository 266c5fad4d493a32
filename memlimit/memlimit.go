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

// liveHeapHeadroom is how far above the live heap the adaptive limit stays once the live heap is
// large: a process whose cache outgrew the floor collects when its heap grows by a quarter (as
// GOGC=25), never continuously. A quarter is what keeps a large cache's peak low; below four
// times its slack (minSlack), the heap grows by at least the slack instead, so that a cache on
// its way up (a hub creating 150,000 replicas) is not collected four times as often as GOGC's
// default would, for memory it will use anyway at the top.
const liveHeapHeadroom = 1.25

// minSlack is the least the adaptive limit leaves above the live heap, as a share of the floor:
// 32 MiB for the hub's 48 MiB floor. A small process's limit is still its floor; a large one's
// still 1.25 × live, so neither peak changes.
const minSlack = 2.0 / 3

// containerShare is the part of its container's memory limit a process lets its Go heap reach:
// the rest is its binary's pages (~40 MiB of a Regent binary are file-backed and charged to the
// container), stacks and the runtime's own.
const containerShare = 0.85

// adapt sets the runtime's soft memory limit to adaptiveLimit of the live heap, but never above
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

// adaptiveLimit is max(floor, live + max(live/4, minSlack × floor)), capped at ceiling when
// ceiling is positive.
func adaptiveLimit(live uint64, floor, ceiling int64) int64 {
	slack := max(int64(float64(live)*(liveHeapHeadroom-1)), int64(float64(floor)*minSlack))
	limit := max(floor, int64(live)+slack)
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
