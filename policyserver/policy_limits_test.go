package policyserver

import (
	"context"
	"testing"
	"time"
)

func TestPolicyLimiter_TheQueueIsBoundedByTheExpectedWait(t *testing.T) {
	for _, tc := range []struct {
		name         string
		workers      int
		queue        int
		wait         time.Duration
		held         time.Duration
		wantAdmitted int
	}{
		{name: "a fast policy queues far beyond a count of tens, up to the time budget",
			workers: 1, queue: 1000, wait: 100 * time.Millisecond, held: 250 * time.Microsecond,
			wantAdmitted: 1 + 400},
		{name: "a slow policy's second waiting request already exceeds the budget",
			workers: 1, queue: 1000, wait: time.Second, held: 600 * time.Millisecond,
			wantAdmitted: 1 + 1},
		{name: "more workers drain the line faster, so more may wait",
			workers: 2, queue: 1000, wait: time.Second, held: 600 * time.Millisecond,
			wantAdmitted: 2 + 3},
		{name: "the count still bounds a policy whose evaluations are instant",
			workers: 1, queue: 3, wait: time.Second, held: 0,
			wantAdmitted: 1 + 3},
		{name: "a negative budget leaves only the count",
			workers: 1, queue: 5, wait: -1, held: time.Hour,
			wantAdmitted: 1 + 5},
		{name: "before any evaluation has ended only the count applies",
			workers: 1, queue: 7, wait: time.Millisecond, held: 0,
			wantAdmitted: 1 + 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newPolicyLimiter(tc.workers, tc.queue, tc.wait)
			l.held.Store(int64(tc.held))
			admitted := 0
			for n := int64(1); n <= 5000 && l.admits(n); n++ {
				admitted++
			}
			if admitted != tc.wantAdmitted {
				t.Fatalf("%d requests admitted to run or wait, want %d", admitted, tc.wantAdmitted)
			}
		})
	}
}

func TestPolicyLimiter_TheAverageFollowsAPolicyThatTurnsSlow(t *testing.T) {
	l := newPolicyLimiter(1, 1000, time.Second)
	hold := func(d time.Duration) {
		l.running <- struct{}{}
		l.inFlight.Add(1)
		l.leave(d)
	}
	for range 50 {
		hold(time.Millisecond)
	}
	if got := time.Duration(l.held.Load()); got < 900*time.Microsecond || got > time.Millisecond {
		t.Fatalf("after steady 1ms evaluations the average is %s", got)
	}
	if !l.admits(1 + 500) {
		t.Fatal("500 waiting behind 1ms evaluations (0.5s) must fit a 1s budget")
	}
	for range 20 {
		hold(time.Second)
	}
	if l.admits(1 + 2) {
		t.Fatalf("after the policy turned to 1s evaluations (average %s), two waiting must exceed a 1s budget", time.Duration(l.held.Load()))
	}
}

func TestPolicyLimiter_LeaveGivesTheShareBackOnce(t *testing.T) {
	l := newPolicyLimiter(1, 10, time.Second)
	for range 64 {
		leave, ok := l.enter(context.Background())
		if !ok {
			t.Fatal("an idle policy refused a request")
		}
		leave()
		leave()
	}
	if l.inFlight.Load() != 0 || len(l.running) != 0 {
		t.Fatalf("after every leave: %d in flight, %d running, want none", l.inFlight.Load(), len(l.running))
	}
}
