package loadgen

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// drive moves the fake clock on by step whenever the run waits for its next request, until the
// clock has reached until and the run waits again (every request due by then was decided), or
// done closes.
func drive(fc *clocktesting.FakeClock, step time.Duration, until time.Time, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		default:
		}
		if !fc.HasWaiters() {
			time.Sleep(20 * time.Microsecond)
			continue
		}
		if !fc.Now().Before(until) {
			return
		}
		fc.Step(step)
	}
}

// runDriven runs o on a fake clock stepped by step, to completion.
func runDriven(o OpenLoop, step time.Duration, send Sender) OpenResult {
	fc := clocktesting.NewFakeClock(t0)
	o.Clock = fc
	done := make(chan struct{})
	go drive(fc, step, t0.Add(24*time.Hour), done)
	defer close(done)
	return o.Run(context.Background(), send)
}

func TestOpenLoop_SendsRateTimesWarmupPlusDurationAndCountsOnlyTheMeasuredWindow(t *testing.T) {
	var mu sync.Mutex
	sent := map[int]int{}
	send := func(_ context.Context, seq int) (Outcome, error) {
		mu.Lock()
		sent[seq]++
		mu.Unlock()
		switch seq % 10 {
		case 3:
			return Rejected, errors.New("status 429")
		case 7:
			return Wrong, errors.New("denied")
		case 9:
			return Failed, errors.New("connection reset")
		}
		return Correct, nil
	}
	r := runDriven(OpenLoop{Rate: 100, Warmup: time.Second, Duration: 2 * time.Second, KeepErrors: 4}, 10*time.Millisecond, send)

	if len(sent) != 300 {
		t.Errorf("%d distinct requests sent, want 300 (100/s for 1 s of warmup and 2 s measured)", len(sent))
	}
	for seq, n := range sent {
		if n != 1 || seq < 0 || seq >= 300 {
			t.Errorf("request %d sent %d times", seq, n)
		}
	}
	want := OpenResult{Rate: 100, Scheduled: 200, Correct: 140, Rejected: 20, Wrong: 20, Failed: 20}
	if r.Scheduled != want.Scheduled || r.Correct != want.Correct || r.Rejected != want.Rejected ||
		r.Wrong != want.Wrong || r.Failed != want.Failed || r.Skipped != 0 || r.Overflow != 0 || r.Rate != 100 {
		t.Errorf("result %+v, want the counts of %+v", r, want)
	}
	if len(r.Errors) != 4 {
		t.Errorf("kept %d errors, want the first 4: %q", len(r.Errors), r.Errors)
	}
	if r.AllCorrect() {
		t.Error("AllCorrect with 60 requests not answered correctly")
	}
}

func TestOpenLoop_AStalledAnswerHoldsBackNoLaterRequestAndCountsItsWholeWait(t *testing.T) {
	const n = 100
	others := atomic.Int64{}
	allOthersSent := make(chan struct{})
	send := func(_ context.Context, seq int) (Outcome, error) {
		if seq == 0 {
			<-allOthersSent // a closed loop would never send request 1
			return Correct, nil
		}
		if others.Add(1) == n-1 {
			close(allOthersSent)
		}
		return Correct, nil
	}
	r := runDriven(OpenLoop{Rate: 100, Duration: time.Second}, 10*time.Millisecond, send)

	if r.Scheduled != n || r.Correct != n {
		t.Fatalf("%d due, %d correct, want %d each", r.Scheduled, r.Correct, n)
	}
	// Request 0 was answered only after request 99 was due (990 ms into the run).
	if r.Max < 990*time.Millisecond {
		t.Errorf("the stalled request's latency is %s, want at least the 990 ms until its answer", r.Max)
	}
}

func TestOpenLoop_LatencyStartsWhenTheRequestWasDueNotWhenALateGeneratorSentIt(t *testing.T) {
	// The clock moves 10 intervals at a time, so the generator sends ten requests at once, nine of
	// them late by 1–9 intervals; the server answers at once.
	r := runDriven(OpenLoop{Rate: 100, Duration: time.Second}, 100*time.Millisecond,
		func(context.Context, int) (Outcome, error) { return Correct, nil })

	if r.Scheduled != 100 || r.Correct != 100 || !r.AllCorrect() {
		t.Fatalf("%d due, %d correct, want 100 each", r.Scheduled, r.Correct)
	}
	// Lateness of 0–9 intervals, each for a tenth of the requests: the median at least 4, the 99th
	// percentile at least 9 intervals (measured from the send, every latency would be 0).
	if r.P50 < 40*time.Millisecond || r.P99 < 90*time.Millisecond {
		t.Errorf("p50 %s, p99 %s: want at least 40 ms and 90 ms of the generator's lateness", r.P50, r.P99)
	}
	if r.SendLagP99 < 90*time.Millisecond {
		t.Errorf("send lag p99 %s, want at least 90 ms: the generator was that late", r.SendLagP99)
	}
}

func TestOpenLoop_ARequestDueWithMaxInFlightOutstandingIsNotSentButCounted(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	release := make(chan struct{})
	send := func(context.Context, int) (Outcome, error) {
		<-release
		return Correct, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	results := make(chan OpenResult, 1)
	go func() { results <- OpenLoop{Rate: 100, MaxInFlight: 5, Clock: fc}.Run(ctx, send) }()
	// Until the run waits for the request due at 200 ms: the 20 before it were decided.
	drive(fc, 10*time.Millisecond, t0.Add(190*time.Millisecond), nil)
	cancel()
	close(release)
	r := <-results

	if r.Scheduled != 20 || r.Correct != 5 || r.Overflow != 15 {
		t.Errorf("%d due, %d correct, %d overflowed; want 20, 5 (the in-flight bound) and 15", r.Scheduled, r.Correct, r.Overflow)
	}
	if r.AllCorrect() {
		t.Error("AllCorrect although 15 requests were never sent")
	}
}

func TestOpenLoop_SkippedRequestsAreCountedApartAndKeepNoError(t *testing.T) {
	r := runDriven(OpenLoop{Rate: 10, Duration: time.Second}, 100*time.Millisecond,
		func(_ context.Context, seq int) (Outcome, error) {
			if seq < 4 {
				return Skipped, nil
			}
			return Correct, nil
		})
	if r.Scheduled != 10 || r.Skipped != 4 || r.Correct != 6 || len(r.Errors) != 0 {
		t.Errorf("result %+v, want 10 due, 4 skipped, 6 correct, no errors", r)
	}
}

func TestKnee(t *testing.T) {
	pass := func(rate float64, p99 time.Duration) OpenResult {
		return OpenResult{Rate: rate, Scheduled: 100, Correct: 100, P99: p99}
	}
	rejecting := func(rate float64) OpenResult {
		return OpenResult{Rate: rate, Scheduled: 100, Correct: 97, Rejected: 3, P99: time.Millisecond}
	}
	for _, tc := range []struct {
		name   string
		points []OpenResult
		want   float64
	}{
		{"every point within the bound: the highest rate", []OpenResult{pass(500, 2e6), pass(1000, 3e6), pass(1500, 9e6)}, 1500},
		{"p99 over the bound ends it", []OpenResult{pass(500, 2e6), pass(1000, 11e6), pass(1500, 3e6)}, 500},
		{"a request not answered correctly ends it, whatever the latency", []OpenResult{pass(500, 2e6), rejecting(1000)}, 500},
		{"a passing point after a failing one does not count", []OpenResult{pass(500, 2e6), rejecting(1000), pass(1500, 2e6)}, 500},
		{"the first point fails: no knee", []OpenResult{rejecting(500), pass(1000, 2e6)}, 0},
		{"a point where nothing was due is no pass", []OpenResult{pass(500, 2e6), {Rate: 1000}}, 500},
		{"no points", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Knee(tc.points, 10*time.Millisecond); got != tc.want {
				t.Errorf("Knee = %v, want %v", got, tc.want)
			}
		})
	}
}
