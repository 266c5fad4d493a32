package loadgen

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Outcome is how one request of an open-loop run ended.
type Outcome int

const (
	// Correct: answered with the expected answer.
	Correct Outcome = iota
	// Rejected: the server turned the request away (HTTP 429) instead of evaluating it.
	Rejected
	// Wrong: answered, but not with the expected answer.
	Wrong
	// Failed: no answer (connection error, timeout) or any other status.
	Failed
	// Skipped: the sender had nowhere to send the request yet (a chaos test before its webhook
	// exists); it is not a request and counts in no other outcome.
	Skipped
)

// Sender sends request seq and says how it ended; err explains any outcome but Correct. Senders
// run concurrently, one goroutine per request.
type Sender func(ctx context.Context, seq int) (Outcome, error)

// DefaultMaxInFlight bounds an open loop's requests in flight unless OpenLoop says otherwise: an
// overloaded server otherwise grows one goroutine and, over HTTPS, one TLS connection per due
// request until the generator starves the machine it shares with the server.
const DefaultMaxInFlight = 1000

// OpenLoop sends requests at a fixed rate, each when it is due whatever the earlier ones are
// doing, and measures each latency from the moment it was due.
type OpenLoop struct {
	// Rate is the requests per second.
	Rate float64
	// Warmup is sent but not measured; Duration is measured after it. Duration 0 runs until the
	// context ends, measuring everything after the warmup.
	Warmup, Duration time.Duration
	// MaxInFlight bounds the requests in flight (default DefaultMaxInFlight); a request due while
	// that many are in flight is not sent and counts as Overflow.
	MaxInFlight int
	// Clock paces the run and times the answers (default: the real clock).
	Clock clock.Clock
	// KeepErrors is how many error messages the result keeps (default 10).
	KeepErrors int
}

// OpenResult is what an open-loop run measured over its measured window.
type OpenResult struct {
	Rate float64
	// Scheduled is the requests due in the measured window; each ended as exactly one of Correct,
	// Rejected, Wrong, Failed, Skipped or Overflow (not sent: MaxInFlight in flight).
	Scheduled                                           int
	Correct, Rejected, Wrong, Failed, Skipped, Overflow int
	// P50, P90, P99 and Max are the latencies of the correct answers, each from the moment its
	// request was due: time spent waiting for a late generator or a busy server is included.
	P50, P90, P99, Max time.Duration
	// SendLagP99 is how late the generator itself sent (the 99th percentile of send time minus due
	// time): large values mean the generator, not the server, fell behind.
	SendLagP99 time.Duration
	// Errors holds the first KeepErrors errors, in the order they were seen.
	Errors []string
}

// AllCorrect reports whether every request due in the measured window was answered correctly.
func (r OpenResult) AllCorrect() bool { return r.Scheduled > 0 && r.Correct == r.Scheduled }

// Run sends requests through send until Duration has passed after Warmup, or ctx ends, then
// waits for the requests in flight.
func (o OpenLoop) Run(ctx context.Context, send Sender) OpenResult {
	clk := o.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	maxInFlight := o.MaxInFlight
	if maxInFlight <= 0 {
		maxInFlight = DefaultMaxInFlight
	}
	keep := o.KeepErrors
	if keep <= 0 {
		keep = 10
	}
	total := -1 // until ctx ends
	if o.Duration > 0 {
		total = o.due(o.Warmup + o.Duration)
	}
	warm := o.due(o.Warmup)

	t := &tally{keep: keep}
	var inFlight atomic.Int64
	var wg sync.WaitGroup
	start := clk.Now()
	for seq := 0; total < 0 || seq < total; seq++ {
		at := start.Add(time.Duration(float64(seq) / o.Rate * float64(time.Second)))
		if wait := at.Sub(clk.Now()); wait > 0 {
			select {
			case <-ctx.Done():
			case <-clk.After(wait):
			}
		}
		if ctx.Err() != nil {
			break
		}
		measured := seq >= warm
		if measured {
			t.due()
		}
		if inFlight.Load() >= int64(maxInFlight) {
			if measured {
				t.overflow()
			}
			continue
		}
		if measured {
			t.lag(clk.Since(at))
		}
		inFlight.Add(1)
		wg.Go(func() {
			defer inFlight.Add(-1)
			out, err := send(ctx, seq)
			if measured {
				t.record(out, clk.Since(at), err)
			}
		})
	}
	wg.Wait()
	return t.result(o.Rate)
}

// due is how many requests fall due before d into a run: the one at 0 and every 1/Rate after. The
// epsilon keeps a product that float arithmetic puts a hair above an integer (0.1 s × 30/s) at it.
func (o OpenLoop) due(d time.Duration) int {
	return int(math.Ceil(d.Seconds()*o.Rate - 1e-9))
}

// tally accumulates an open loop's outcomes; its methods are safe for concurrent use.
type tally struct {
	mu   sync.Mutex
	keep int
	r    OpenResult
	lat  []time.Duration
	lags []time.Duration
}

func (t *tally) due() {
	t.mu.Lock()
	t.r.Scheduled++
	t.mu.Unlock()
}

func (t *tally) overflow() {
	t.mu.Lock()
	t.r.Overflow++
	t.mu.Unlock()
}

func (t *tally) lag(d time.Duration) {
	t.mu.Lock()
	t.lags = append(t.lags, d)
	t.mu.Unlock()
}

func (t *tally) record(out Outcome, latency time.Duration, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch out {
	case Correct:
		t.r.Correct++
		t.lat = append(t.lat, latency)
	case Rejected:
		t.r.Rejected++
	case Wrong:
		t.r.Wrong++
	case Skipped:
		t.r.Skipped++
	default:
		t.r.Failed++
	}
	if out != Correct && out != Skipped && len(t.r.Errors) < t.keep {
		if err == nil {
			err = fmt.Errorf("outcome %d without an error", out)
		}
		t.r.Errors = append(t.r.Errors, err.Error())
	}
}

func (t *tally) result(rate float64) OpenResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.r
	r.Rate = rate
	r.Errors = slices.Clone(r.Errors)
	slices.Sort(t.lat)
	r.P50, r.P90, r.P99 = percentile(t.lat, 0.50), percentile(t.lat, 0.90), percentile(t.lat, 0.99)
	if len(t.lat) > 0 {
		r.Max = t.lat[len(t.lat)-1]
	}
	slices.Sort(t.lags)
	r.SendLagP99 = percentile(t.lags, 0.99)
	return r
}

// percentile of sorted values, by the nearest-rank method; 0 for none.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(p*float64(len(sorted)-1))]
}

// Knee is the highest rate of a sweep (points in ascending rate) up to which every point answered
// every request correctly with p99 at most bound; 0 when the first point already fails. A point
// after the first failing one does not count even when it passes: a server that failed at a
// lower rate cannot be relied on at a higher one.
func Knee(points []OpenResult, bound time.Duration) float64 {
	knee := 0.0
	for _, p := range points {
		if !p.AllCorrect() || p.P99 > bound {
			break
		}
		knee = p.Rate
	}
	return knee
}
