package memlimit

import (
	"context"
	"runtime/debug"
	"testing"
	"time"
)

func TestAdapt_KeepsTheFloorThenRestores(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	ctx, cancel := context.WithCancel(context.Background())
	adapt(ctx, 1<<40)
	if got := debug.SetMemoryLimit(-1); got != 1<<40 {
		t.Errorf("limit %d, want the floor %d", got, int64(1<<40))
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for debug.SetMemoryLimit(-1) != before {
		if time.Now().After(deadline) {
			t.Fatalf("limit %d not restored to %d", debug.SetMemoryLimit(-1), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAdaptiveLimit_FollowsTheLiveHeapUnderTheContainersShare(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live                 uint64
		floor, ceiling, want int64
	}{
		{live: 10 * mib, floor: 48 * mib, want: 48 * mib},                       // the floor
		{live: 40 * mib, floor: 48 * mib, want: 72 * mib},                       // live + 32 MiB, two thirds of the floor
		{live: 128 * mib, floor: 48 * mib, want: 160 * mib},                     // where a quarter of live is the slack
		{live: 200 * mib, floor: 48 * mib, want: 250 * mib},                     // 1.25 × live
		{live: 100 * mib, floor: 32 * mib, want: 125 * mib},                     // 1.25 × live over a smaller floor
		{live: 100 * mib, floor: 48 * mib, ceiling: 217 * mib, want: 132 * mib}, // under the container's share
		{live: 200 * mib, floor: 48 * mib, ceiling: 217 * mib, want: 217 * mib}, // capped by it
		{live: 0, floor: 48 * mib, ceiling: 32 * mib, want: 32 * mib},           // a container smaller than the floor
	} {
		if got := adaptiveLimit(c.live, c.floor, c.ceiling); got != c.want {
			t.Errorf("live %d MiB, floor %d MiB, ceiling %d MiB: limit %d MiB, want %d MiB",
				c.live/mib, c.floor/mib, c.ceiling/mib, got/mib, c.want/mib)
		}
	}
}
