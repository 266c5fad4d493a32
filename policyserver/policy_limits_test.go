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
			l := newPolicyLimiter(tc.workers, tc.workers, 0, tc.queue, tc.wait)
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
	l := newPolicyLimiter(1, 1, 0, 1000, time.Second)
	hold := func(d time.Duration) {
		if _, _, ok := l.enter(context.Background(), false); !ok {
			t.Fatal("an idle policy refused a request")
		}
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
	l := newPolicyLimiter(1, 2, 25*time.Millisecond, 10, time.Second)
	for range 64 {
		leave, _, ok := l.enter(context.Background(), true)
		if !ok {
			t.Fatal("an idle policy refused a request")
		}
		leave()
		leave()
	}
	if l.inFlight.Load() != 0 || l.running != 0 {
		t.Fatalf("after every leave: %d in flight, %d running, want none", l.inFlight.Load(), l.running)
	}
}

// grant is what enter answered, for a caller that waits in line in a goroutine.
type grant struct {
	leave    func()
	borrowed bool
	ok       bool
}

func enterAsync(l *policyLimiter, ctx context.Context, mayBorrow bool) <-chan grant {
	out := make(chan grant, 1)
	go func() {
		leave, borrowed, ok := l.enter(ctx, mayBorrow)
		out <- grant{leave, borrowed, ok}
	}()
	return out
}

func waitInLine(t *testing.T, l *policyLimiter, n int) {
	t.Helper()
	waitFor(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.line) == n
	})
}

func TestPolicyLimiter_AFastPolicyBorrowsIdleWorkersUpToAll(t *testing.T) {
	// A limit far beyond what this test holds a share for, however slow the machine: the
	// average must stay short enough to borrow.
	l := newPolicyLimiter(1, 2, time.Hour, 10, time.Second)
	l.held.Store(int64(300 * time.Microsecond))
	ctx := context.Background()
	own, borrowed, ok := l.enter(ctx, true)
	if !ok || borrowed {
		t.Fatalf("the first request: ok %v borrowed %v, want the policy's own share", ok, borrowed)
	}
	lent, borrowed, ok := l.enter(ctx, true)
	if !ok || !borrowed {
		t.Fatalf("the second request of a fast policy: ok %v borrowed %v, want a borrowed worker", ok, borrowed)
	}
	third := enterAsync(l, ctx, true)
	waitInLine(t, l, 1)
	// The borrowed worker comes back first: the one waiting borrows it in turn.
	lent()
	if g := <-third; !g.ok || !g.borrowed {
		t.Fatalf("the request waiting for a borrowed worker: ok %v borrowed %v", g.ok, g.borrowed)
	}
	own()
	if l.running != 1 {
		t.Fatalf("%d running after two of three left, want 1", l.running)
	}
}

func TestPolicyLimiter_WhoMayNotBorrowWaitsForTheShare(t *testing.T) {
	for _, tc := range []struct {
		name      string
		held      time.Duration
		limit     time.Duration
		mayBorrow bool
	}{
		{name: "a policy whose evaluations take over an eighth of the limit", held: 4 * time.Millisecond, limit: 25 * time.Millisecond, mayBorrow: true},
		{name: "a caller that may not borrow (the background scan, a retry after a cut)", held: 0, limit: 25 * time.Millisecond, mayBorrow: false},
		{name: "a server that never lends", held: 0, limit: 0, mayBorrow: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newPolicyLimiter(1, 2, tc.limit, 10, time.Second)
			l.held.Store(int64(tc.held))
			first, _, _ := l.enter(context.Background(), true)
			second := enterAsync(l, context.Background(), tc.mayBorrow)
			waitInLine(t, l, 1)
			first()
			if g := <-second; !g.ok || g.borrowed {
				t.Fatalf("ok %v borrowed %v, want the policy's own share once it was free", g.ok, g.borrowed)
			}
		})
	}
}

// TestPolicyLimiter_AnEvaluationCutOnItsBorrowedWorkerEndsTheBorrowing: the server records a
// cut evaluation's time (at least the limit), which lifts the average past what may borrow.
func TestPolicyLimiter_AnEvaluationCutOnItsBorrowedWorkerEndsTheBorrowing(t *testing.T) {
	limit := 25 * time.Millisecond
	l := newPolicyLimiter(1, 2, limit, 10, time.Second)
	l.held.Store(int64(200 * time.Microsecond))
	if !l.borrows() {
		t.Fatal("a policy of 200µs evaluations must borrow")
	}
	l.running = 2
	l.inFlight.Store(2)
	l.leave(limit + time.Millisecond)
	if l.borrows() {
		t.Fatalf("after a cut (average now %s) the policy still borrows", time.Duration(l.held.Load()))
	}
}

func TestPolicyLimiter_AWaiterThatGivesUpLeavesTheLine(t *testing.T) {
	l := newPolicyLimiter(1, 1, 0, 10, time.Second)
	first, _, _ := l.enter(context.Background(), false)
	ctx, cancel := context.WithCancel(context.Background())
	second := enterAsync(l, ctx, false)
	waitInLine(t, l, 1)
	cancel()
	if g := <-second; g.ok {
		t.Fatal("a caller that gave up was granted a share")
	}
	first()
	if l.running != 0 || l.inFlight.Load() != 0 || len(l.line) != 0 {
		t.Fatalf("running %d, in flight %d, line %d: want all zero", l.running, l.inFlight.Load(), len(l.line))
	}
}
