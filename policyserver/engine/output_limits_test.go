package engine

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
)

// floodRequest is a pod request whose labels tell the flood guests what to do.
func floodRequest(t *testing.T, labels map[string]int) []byte {
	t.Helper()
	l := map[string]string{}
	for k, v := range labels {
		l[k] = strconv.Itoa(v)
	}
	return podRequest(t, "default", l, container("c", "nginx:1", false))
}

// allocatedDuring reports the bytes the whole process allocated while f ran: what the host took
// on, whatever it freed since.
func allocatedDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestOutputLimit_WASIStdoutFloodTrapsTheGuestAndTheHostHoldsAtMostTheLimit(t *testing.T) {
	e := newTestEngine(t, Options{})
	p := load(t, e, Spec{Module: guest(t, "wasi-flood"), ExecutionMode: ModeWASI, Timeout: time.Minute})
	const flood = 256 << 20
	var err error
	allocated := allocatedDuring(func() {
		_, err = p.Validate(context.Background(), floodRequest(t, map[string]int{"flood": flood}))
	})
	if err == nil || !strings.Contains(err.Error(), "output limit") {
		t.Fatalf("want an output-limit error, got %v", err)
	}
	// The guest wrote 256 MiB; the host may hold the limit, a second instance starting in the
	// background and the bookkeeping around them, never the flood.
	if allocated > 64<<20 {
		t.Fatalf("the host allocated %d MiB while the guest wrote %d MiB to stdout", allocated>>20, flood>>20)
	}
	if r := validate(t, p, floodRequest(t, nil)); !r.Accepted {
		t.Fatalf("the next evaluation must work, got %+v", r)
	}
}

func TestOutputLimit_WaPCResponseOverTheLimitTrapsTheGuest(t *testing.T) {
	e := newTestEngine(t, Options{})
	p := load(t, e, Spec{Module: guest(t, "wapc-flood"), Timeout: time.Minute})
	_, err := p.Validate(context.Background(), floodRequest(t, map[string]int{"respond": 64 << 20}))
	if err == nil || !strings.Contains(err.Error(), "output limit") {
		t.Fatalf("want an output-limit error, got %v", err)
	}
	if r := validate(t, p, floodRequest(t, nil)); !r.Accepted {
		t.Fatalf("the next evaluation must work, got %+v", r)
	}
}

// logHost counts the tracing/log host calls that reach it.
type logHost struct{ lines atomic.Int64 }

func (h *logHost) Call(_ context.Context, c HostCall) ([]byte, error) {
	if c.Capability() == "kubewarden/tracing/log" {
		h.lines.Add(1)
	}
	return nil, nil
}

func TestGuestLogs_AFloodingGuestIsRateLimitedAndStillAnswers(t *testing.T) {
	var mu sync.Mutex
	console := 0
	logger := funcr.New(func(_, args string) {
		if strings.Contains(args, "flooding") {
			mu.Lock()
			console++
			mu.Unlock()
		}
	}, funcr.Options{})
	host := &logHost{}
	var dropped atomic.Int64
	e := newTestEngine(t, Options{Logger: logger, Host: host, OnGuestLogDropped: func(policy string) {
		if policy == t.Name() {
			dropped.Add(1)
		}
	}})
	p := load(t, e, Spec{Module: guest(t, "wapc-flood"), Timeout: time.Minute})
	const lines = 10000
	start := time.Now()
	if r := validate(t, p, floodRequest(t, map[string]int{"flood": lines})); !r.Accepted {
		t.Fatalf("dropping log lines must not change the answer, got %+v", r)
	}
	elapsed := time.Since(start)
	mu.Lock()
	logged := int64(console) + host.lines.Load()
	mu.Unlock()
	// A token bucket lets through its burst plus its rate for the time the guest ran.
	bound := int64(DefaultGuestLogBurst) + int64(DefaultGuestLogLinesPerSecond*elapsed.Seconds()) + 1
	if logged > bound {
		t.Fatalf("%d of the guest's %d lines reached the logs in %s, over the rate limit's %d", logged, 2*lines, elapsed, bound)
	}
	if logged+dropped.Load() != 2*lines {
		t.Fatalf("%d lines logged and %d counted as dropped, want the guest's %d in all", logged, dropped.Load(), 2*lines)
	}
}
