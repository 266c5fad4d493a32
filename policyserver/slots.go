package policyserver

import (
	"context"
	"errors"
	"sync"
	"time"

	"regent.dev/regent/policyserver/engine"
)

// errBorrowEnded cuts an evaluation that ran past its borrowed time.
var errBorrowEnded = errors.New("borrowed worker time ended")

// Why takeSlot turned a request away; also the reason label of
// regent_policyserver_requests_rejected_total.
const (
	reasonSaturated  = "policy_saturated"
	reasonOverloaded = "overloaded"
)

// slot is a request's place to evaluate: its policy's share (its own or borrowed) and one of the
// server's workers. release gives both back, once.
type slot struct {
	borrowed bool
	release  func()
}

// takeSlot takes the policy's share, then a worker; reason says which one turned the request
// away (policy_saturated, overloaded). mayBorrow lets a fast policy use workers beyond its share.
func (s *Server) takeSlot(ctx context.Context, p *servedPolicy, mayBorrow bool) (sl slot, reason string, ok bool) {
	// The policy's share first, then a worker: a request waiting for either holds only its
	// headers, never its body (up to maxReviewBytes each).
	leave, borrowed, ok := p.limiter.enter(ctx, mayBorrow && s.borrowLimit > 0)
	if !ok {
		return slot{}, reasonSaturated, false
	}
	if !s.enterWorker(ctx) {
		leave()
		return slot{}, reasonOverloaded, false
	}
	return slot{borrowed: borrowed, release: sync.OnceFunc(func() { <-s.workers; leave() })}, "", true
}

// validate evaluates the request in sl. A borrowed slot's evaluation is cut at the borrow limit
// and run again in the policy's own share, so a policy that turns slow cannot keep a core it
// borrowed; the request is answered either way. sl may be replaced by the retry's slot.
func (s *Server) validate(ctx context.Context, p *servedPolicy, request []byte, sl *slot) (engine.Response, error) {
	if !sl.borrowed {
		return p.Validate(ctx, request)
	}
	bctx, cancel := context.WithTimeoutCause(ctx, s.borrowLimit, errBorrowEnded)
	answer, err := p.Validate(bctx, request)
	cancel()
	if err == nil || ctx.Err() != nil || !errors.Is(context.Cause(bctx), errBorrowEnded) {
		s.metrics.borrowed.WithLabelValues(p.name, "completed").Inc()
		return answer, err
	}
	s.metrics.borrowed.WithLabelValues(p.name, "cut").Inc()
	sl.release()
	again, reason, ok := s.takeSlot(ctx, p, false)
	if !ok {
		*sl = slot{release: func() {}}
		return engine.Response{}, &slotRefused{reason: reason}
	}
	*sl = again
	return p.Validate(ctx, request)
}

// slotRefused is a retry after a cut that found no place: the request is turned away as any
// other beyond the policy's share (429), not denied, since the policy never answered it.
type slotRefused struct{ reason string }

func (e *slotRefused) Error() string { return "no worker to evaluate again after a cut: " + e.reason }

// DefaultPolicyBorrowLimit bounds an evaluation on a borrowed worker (Options.PolicyBorrowLimit).
const DefaultPolicyBorrowLimit = 25 * time.Millisecond
