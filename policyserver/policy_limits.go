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
// time out.
//
// A fast policy may borrow beyond that share, up to every worker (`all`), while its recent
// evaluations are far shorter than `borrowLimit`: on a small node the share is one core of two,
// and a cluster whose webhook traffic is one fast policy would otherwise leave the other core
// idle under load. What keeps the isolation is that borrowed time is bounded: the server cuts a
// borrowed evaluation at borrowLimit and runs it again inside the policy's own share (see
// Server.validate), and the cut sample makes the policy's average too long to borrow again, so
// a policy that turns slow holds a borrowed core for borrowLimit once, not until its timeout.
//
// Requests beyond the share wait, and are turned away at once (429) instead of piling up when
// either bound is reached: `queue` waiting requests, or an expected wait over `wait` (the
// waiting requests times the policy's recent evaluation time, per worker). The time bound is
// what sizes the queue in practice: a count alone is tens of milliseconds of work for a fast
// policy at a thousand requests a second, which any pause of the process (a GC, a descheduled
// core, a burst of TLS handshakes) overflows, turning away requests a moment later would have
// answered well within the webhook's timeout; while a slow policy's few waiting requests already
// exceed the budget. Each loaded revision has its own limiter; the webhook calls one generation
// of a policy at a time.
type policyLimiter struct {
	workers     int64
	all         int64
	borrowLimit time.Duration
	max         int64
	wait        time.Duration
	inFlight    atomic.Int64
	// held is a moving average of how long an admitted request holds its worker, in ns.
	held atomic.Int64

	mu      sync.Mutex
	running int64
	line    []*shareWaiter
}

// shareWaiter is a request waiting in a policy's line; grant receives whether its share is
// borrowed.
type shareWaiter struct {
	grant chan bool
	// own: the request may not borrow (a retry after a cut, the background scan).
	own bool
}

// newPolicyLimiter sizes a policy's share: workers of its own, up to all by borrowing while its
// evaluations are short of borrowLimit (zero or negative: never borrows).
func newPolicyLimiter(workers, all int, borrowLimit time.Duration, queue int, wait time.Duration) *policyLimiter {
	return &policyLimiter{workers: int64(workers), all: int64(max(all, workers)), borrowLimit: borrowLimit,
		max: int64(workers + queue), wait: wait}
}

// enter takes one of the policy's worker shares, waiting if the queue's bounds allow; ok false
// means the policy has too many requests in flight, or the caller gave up. borrowed says the
// share is beyond the policy's own (only when mayBorrow): its evaluation must end within
// borrowLimit. After ok, leave gives the share back (once).
func (p *policyLimiter) enter(ctx context.Context, mayBorrow bool) (leave func(), borrowed, ok bool) {
	if !p.admits(p.inFlight.Add(1)) {
		p.inFlight.Add(-1)
		return nil, false, false
	}
	p.mu.Lock()
	if len(p.line) == 0 {
		if b, ok := p.take(mayBorrow); ok {
			p.mu.Unlock()
			return p.leaver(), b, true
		}
	}
	w := &shareWaiter{grant: make(chan bool, 1), own: !mayBorrow}
	p.line = append(p.line, w)
	p.mu.Unlock()
	select {
	case b := <-w.grant:
		return p.leaver(), b, true
	case <-ctx.Done():
		p.mu.Lock()
		for i, x := range p.line {
			if x == w {
				p.line = append(p.line[:i], p.line[i+1:]...)
				p.mu.Unlock()
				p.inFlight.Add(-1)
				return nil, false, false
			}
		}
		p.mu.Unlock()
		// Granted while giving up: hand the share on.
		<-w.grant
		p.release()
		return nil, false, false
	}
}

// take gives the caller a share if one is free; p.mu is held.
func (p *policyLimiter) take(mayBorrow bool) (borrowed, ok bool) {
	switch {
	case p.running < p.workers:
		p.running++
		return false, true
	case mayBorrow && p.running < p.all && p.borrows():
		p.running++
		return true, true
	}
	return false, false
}

// borrows says whether the policy's recent evaluations are short enough to borrow a worker:
// an eighth of the limit, so a cut is rare for a policy that borrows.
func (p *policyLimiter) borrows() bool {
	return p.borrowLimit > 0 && time.Duration(p.held.Load()) < p.borrowLimit/8
}

func (p *policyLimiter) leaver() func() {
	start := time.Now()
	return sync.OnceFunc(func() { p.leave(time.Since(start)) })
}

// admits says whether the inFlight-th request (running or waiting) may wait for a share.
func (p *policyLimiter) admits(inFlight int64) bool {
	return inFlight <= p.max && (p.wait <= 0 || p.expectedWait(inFlight-p.workers) <= p.wait)
}

// expectedWait is how long the waiting-th request in line would wait for a worker, counting
// only the policy's own share: borrowed workers may not be there when it is its turn.
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
	p.release()
}

// release frees a share and hands it to the first in line that may take it.
func (p *policyLimiter) release() {
	p.mu.Lock()
	p.running--
	for len(p.line) > 0 {
		b, ok := p.take(!p.line[0].own)
		if !ok {
			break
		}
		p.line[0].grant <- b
		p.line = p.line[1:]
	}
	p.mu.Unlock()
	p.inFlight.Add(-1)
}
