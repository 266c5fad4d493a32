package lifecycle

import (
	"context"
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"regent.dev/regent/policyserver/lifecycle/pull"
)

// maxPullsAtOnce bounds the leader's pulls in flight, and so the memory their modules hold
// (each at most Pull.MaxBytes).
const maxPullsAtOnce = 8

// pulls runs the leader's module pulls in the background, each with its own budget
// (Pull.Timeout), so that a slow server delays only the revisions it serves: a pass prepares
// the revisions whose module has arrived and leaves the others pulling; a pull that ends nudges
// the leader for another pass.
type pulls struct {
	opts  pull.Options
	ended func()
	slots chan struct{}
	wg    sync.WaitGroup

	mu      sync.Mutex
	running map[pullKey]bool
	results map[pullKey]pullResult
}

// pullKey is one revision's module: a revision is never edited, but a new revision of the same
// name (another UID) is another pull.
type pullKey struct {
	uid    types.UID
	module string
}

type pullResult struct {
	module pull.Module
	err    error
}

func newPulls(opts pull.Options, ended func()) *pulls {
	return &pulls{opts: opts, ended: ended, slots: make(chan struct{}, maxPullsAtOnce),
		running: map[pullKey]bool{}, results: map[pullKey]pullResult{}}
}

// get returns the pull's result once it has ended, handing it over, or starts it.
func (p *pulls) get(ctx context.Context, k pullKey) (pullResult, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.results[k]; ok {
		delete(p.results, k)
		if !errors.Is(r.err, context.Canceled) {
			return r, true
		}
		// Cut short by an earlier leadership ending, not the module's fault: pull again.
	}
	if p.running[k] {
		return pullResult{}, false
	}
	p.running[k] = true
	p.wg.Go(func() {
		var r pullResult
		select {
		case p.slots <- struct{}{}:
			r.module, r.err = pull.Fetch(ctx, k.module, p.opts)
			<-p.slots
		case <-ctx.Done():
			r.err = ctx.Err()
		}
		p.mu.Lock()
		delete(p.running, k)
		p.results[k] = r
		p.mu.Unlock()
		p.ended()
	})
	return pullResult{}, false
}

// giveBack returns a result get handed over and that its caller could not use yet (a group
// waiting for the pulls of its other members).
func (p *pulls) giveBack(k pullKey, r pullResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.results[k] = r
}

// keepOnly forgets the results no pass asked for: their revisions are gone or prepared.
func (p *pulls) keepOnly(wanted map[pullKey]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.results {
		if !wanted[k] {
			delete(p.results, k)
		}
	}
}

// wait returns once every pull has ended (their context is done when the leader stops).
func (p *pulls) wait() { p.wg.Wait() }
