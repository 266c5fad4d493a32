package policyserver

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// policyLimiter bounds what one policy takes of the server: at most `workers` of its
// evaluations hold a worker at once, fewer than the server has, so a slow or spinning policy
// (a tenant's, say) always leaves workers to the others. Wasm code cannot be preempted by the
// Go scheduler, so a policy allowed every worker would hold every core until its evaluations
// time out. Each loaded revision has its own limiter; the webhook calls one generation of a
// policy at a time.
//
// Requests beyond the workers wait, and are turned away at once (429) instead of piling up when
// either bound is reached: `queue` waiting requests, or an expected wait over `wait` (the
// waiting requests times the policy's recent evaluation time, per worker). The time bound is
// what sizes the queue in practice: a count alone is tens of milliseconds of work for a fast
// policy at a thousand requests a second, which any pause of the process (a GC, a descheduled
// core, a burst of TLS handshakes) overflows, turning away requests a moment later would have
// answered well within the webhook's timeout; while a slow policy's few waiting requests already
// exceed the budget.
type policyLimiter struct {
	running  chan struct{}
	workers  int64
	inFlight atomic.Int64
	max      int64
	wait     time.Duration
	// held is a moving average of how long an admitted request holds its worker, in ns.
	held atomic.Int64
}

func newPolicyLimiter(workers, queue int, wait time.Duration) *policyLimiter {
	return &policyLimiter{running: make(chan struct{}, workers), workers: int64(workers), max: int64(workers + queue), wait: wait}
}

// enter takes one of the policy's worker shares, waiting if the queue's bounds allow; false
// means the policy has too many requests in flight, or the caller gave up. After a true, leave
// gives the share back (once).
func (p *policyLimiter) enter(ctx context.Context) (leave func(), ok bool) {
	if !p.admits(p.inFlight.Add(1)) {
		p.inFlight.Add(-1)
		return nil, false
	}
	select {
	case p.running <- struct{}{}:
		start := time.Now()
		return sync.OnceFunc(func() { p.leave(time.Since(start)) }), true
	case <-ctx.Done():
		p.inFlight.Add(-1)
		return nil, false
	}
}

// admits says whether the inFlight-th request (running or waiting) may wait for a share.
func (p *policyLimiter) admits(inFlight int64) bool {
	return inFlight <= p.max && (p.wait <= 0 || p.expectedWait(inFlight-p.workers) <= p.wait)
}

// expectedWait is how long the waiting-th request in line would wait for a worker.
func (p *policyLimiter) expectedWait(waiting int64) time.Duration {
	if waiting <= 0 {
		return 0
	}
	return time.Duration(waiting * p.held.Load() / p.workers)
}

// leave gives a worker share back; held is how long the request had it.
func (p *policyLimiter) leave(held time.Duration) {
	// An exponentially weighted average (1/8 per sample): it follows a policy that turns slow
	// within a few requests and is not thrown by one outlier. Concurrent updates may lose a
	// sample, which an average tolerates.
	old := p.held.Load()
	p.held.Store(old + (int64(held)-old)/8)
	<-p.running
	p.inFlight.Add(-1)
}
