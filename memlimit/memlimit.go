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

// liveHeapHeadroom is the room the adaptive limit leaves the heap to grow above the live heap,
// as a share of it, once the live heap is large: a process whose cache outgrew the floor collects
// when its heap grows by an eighth (as GOGC=12.5), never continuously. Below eight times
// minSlack, the heap grows by minSlack instead, so that a cache on its way up (a hub creating
// 150,000 replicas) is not collected at every few megabytes, for memory it will use anyway at
// the top.
const liveHeapHeadroom = 1.0 / 8

// minSlack is the least room the adaptive limit leaves above the live heap and the runtime's
// overhead, as a share of the floor: 16 MiB for the hub's 48 MiB floor.
const minSlack = 1.0 / 3

// containerShare is the part of its container's memory limit a process lets its Go heap reach:
// the rest is its binary's pages (~40 MiB of a Regent binary are file-backed and charged to the
// container), stacks and the runtime's own.
const containerShare = 0.85

// adapt sets the runtime's soft memory limit to adaptiveLimit of the live heap and the runtime's
// overhead, but never above containerShare of the container's memory limit, and keeps it there,
// once a second, until ctx ends; then it restores the previous limit. A fixed limit below what a
// large fleet keeps live would make the collector run without pause; in a container, collecting
// harder near its limit is better than being killed at it.
func adapt(ctx context.Context, floor int64) {
	previous := debug.SetMemoryLimit(-1)
	ceiling := int64(float64(containerLimit()) * containerShare)
	set := func() {
		live, overhead := readHeap()
		debug.SetMemoryLimit(adaptiveLimit(live, overhead, floor, ceiling))
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

// heapSamples are what readHeap reads: the live heap, and the memory the runtime counts against
// its limit but that holds no heap object.
var heapSamples = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/objects:bytes",
}

// readHeap returns the live heap and the runtime's overhead: what it has mapped and not released
// that is neither a heap object nor free heap (stacks, GC metadata, spans' unused bytes). The
// runtime counts that overhead against the memory limit, so a limit that left it out would take
// its room from the heap's: at 150,000 replicas the hub's ~35 MB of overhead took the whole
// quarter of a 144 MB live heap, and the collector ran without pause (docs/benchmarks.md,
// Session 16).
func readHeap() (live, overhead uint64) {
	samples := make([]metrics.Sample, len(heapSamples))
	for i, name := range heapSamples {
		samples[i].Name = name
	}
	metrics.Read(samples)
	var v [5]uint64
	for i, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	if used := v[2] + v[3] + v[4]; v[1] > used {
		overhead = v[1] - used
	}
	return v[0], overhead
}

// adaptiveLimit is max(floor, live + overhead + max(live/8, minSlack × floor)), capped at
// ceiling when ceiling is positive.
func adaptiveLimit(live, overhead uint64, floor, ceiling int64) int64 {
	room := max(int64(float64(live)*liveHeapHeadroom), int64(float64(floor)*minSlack))
	limit := max(floor, int64(live)+int64(overhead)+room)
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
