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
