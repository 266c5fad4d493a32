package engine

import (
	"golang.org/x/time/rate"
)

// Guest logging (waPC's __console_log and Kubewarden's tracing/log) is rate-limited per policy
// with a token bucket: a guest logging in a loop must not flood the server's log, nor its
// collector, nor make the host spend its time formatting lines. Dropped lines are counted, not
// written, and never fail the evaluation.

const (
	// DefaultGuestLogLinesPerSecond and DefaultGuestLogBurst shape each policy's token bucket
	// when Options name none.
	DefaultGuestLogLinesPerSecond = 100
	DefaultGuestLogBurst          = 100
	// guestLogLineLimit is how much of one line is read from the guest and logged.
	guestLogLineLimit = 4 << 10
)

type guestLogs struct {
	policy  string
	limiter *rate.Limiter
	dropped func(policy string)
}

func (e *Engine) newGuestLogs(policy string) *guestLogs {
	return &guestLogs{
		policy:  policy,
		limiter: rate.NewLimiter(rate.Limit(e.opts.GuestLogLinesPerSecond), e.opts.GuestLogBurst),
		dropped: e.opts.OnGuestLogDropped,
	}
}

// allow takes a token for one line, or counts the line as dropped.
func (g *guestLogs) allow() bool {
	if g.limiter.Allow() {
		return true
	}
	if g.dropped != nil {
		g.dropped(g.policy)
	}
	return false
}
