package memlimit

import (
	"context"
	"runtime"
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

func TestAdaptiveLimit_FollowsTheLiveHeapAndOverheadUnderTheContainersShare(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, overhead       uint64
		floor, ceiling, want int64
	}{
		{live: 10 * mib, overhead: 8 * mib, floor: 48 * mib, want: 48 * mib},                        // the floor
		{live: 40 * mib, overhead: 10 * mib, floor: 48 * mib, want: 66 * mib},                       // live + overhead + 16 MiB, a third of the floor
		{live: 128 * mib, overhead: 30 * mib, floor: 48 * mib, want: 174 * mib},                     // where an eighth of live is the room
		{live: 144 * mib, overhead: 35 * mib, floor: 48 * mib, want: 197 * mib},                     // Session 16's hub: 18 MiB of room, not ~1
		{live: 96 * mib, floor: 32 * mib, want: 108 * mib},                                          // an eighth over a smaller floor
		{live: 100 * mib, overhead: 20 * mib, floor: 48 * mib, ceiling: 217 * mib, want: 136 * mib}, // under the container's share
		{live: 200 * mib, overhead: 40 * mib, floor: 48 * mib, ceiling: 217 * mib, want: 217 * mib}, // capped by it
		{live: 0, floor: 48 * mib, ceiling: 32 * mib, want: 32 * mib},                               // a container smaller than the floor
	} {
		if got := adaptiveLimit(c.live, c.overhead, c.floor, c.ceiling); got != c.want {
			t.Errorf("live %d MiB, overhead %d MiB, floor %d MiB, ceiling %d MiB: limit %d MiB, want %d MiB",
				c.live/mib, c.overhead/mib, c.floor/mib, c.ceiling/mib, got/mib, c.want/mib)
		}
	}
}

// The overhead readHeap finds is real memory the runtime holds outside the heap's objects: a
// goroutine's grown stack shows in it.
func TestReadHeap_CountsTheRuntimesOverhead(t *testing.T) {
	runtime.GC() // the live heap is known from the first collection on
	live, before := readHeap()
	if live == 0 || before == 0 {
		t.Fatalf("live %d, overhead %d: want both positive", live, before)
	}
	const stack = 16 << 20
	grown, release := make(chan uint64), make(chan struct{})
	go func() {
		var deep func(n int) uint64
		deep = func(n int) uint64 {
			var pad [1024]byte
			if n == 0 {
				_, o := readHeap()
				grown <- o
				<-release
				return uint64(pad[0])
			}
			return deep(n-1) + uint64(pad[n%len(pad)])
		}
		deep(stack / 1024)
	}()
	after := <-grown
	close(release)
	if after < before+stack/2 {
		t.Errorf("overhead %d MiB with a %d MiB stack, %d MiB without: the stack is not counted", after>>20, stack>>20, before>>20)
	}
}
