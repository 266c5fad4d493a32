package policyserver

import (
	"context"
	"sync/atomic"
)

// policyLimiter bounds what one policy takes of the server: at most `workers` of its
// evaluations hold a worker at once, fewer than the server has, so a slow or spinning policy
// (a tenant's, say) always leaves workers to the others; at most `queue` more wait behind them,
// and beyond that its requests are turned away at once (429) instead of piling up. Wasm code
// cannot be preempted by the Go scheduler, so a policy allowed every worker would hold every
// core until its evaluations time out. Each loaded revision has its own limiter; the webhook
// calls one generation of a policy at a time.
type policyLimiter struct {
	running  chan struct{}
	inFlight atomic.Int64
	max      int64
}

func newPolicyLimiter(workers, queue int) *policyLimiter {
	return &policyLimiter{running: make(chan struct{}, workers), max: int64(workers + queue)}
}

// enter takes one of the policy's worker shares, waiting behind at most queue others; false
// means the policy has too many requests in flight, or the caller gave up. leave must follow a
// true.
func (p *policyLimiter) enter(ctx context.Context) bool {
	if p.inFlight.Add(1) > p.max {
		p.inFlight.Add(-1)
		return false
	}
	select {
	case p.running <- struct{}{}:
		return true
	case <-ctx.Done():
		p.inFlight.Add(-1)
		return false
	}
}

func (p *policyLimiter) leave() {
	<-p.running
	p.inFlight.Add(-1)
}
