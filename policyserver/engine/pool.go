package engine

import (
	"context"
	"errors"
	"sync"
	"time"
)

// instance is one ready-to-call copy of a policy module. It is used by one goroutine at a time.
type instance interface {
	// validate answers a validation payload with a Kubewarden ValidationResponse (JSON).
	validate(ctx context.Context, payload []byte) ([]byte, error)
	// validateSettings answers a settings document with a SettingsValidationResponse (JSON).
	validateSettings(ctx context.Context, settings []byte) ([]byte, error)
	// reusable reports whether the instance may serve another call; an instance that trapped,
	// timed out or exited is not.
	reusable() bool
	close()
}

// errPolicyClosed is returned to a caller that reaches a policy after it was unloaded; the
// registry's reference counting keeps this from happening to requests in flight.
var errPolicyClosed = errors.New("policy was unloaded")

// pool keeps up to cap(slots) instances of one policy and hands them out one caller at a time,
// creating them on demand; callers beyond that wait, which is the backpressure.
type pool struct {
	create func(ctx context.Context) (instance, error)
	idle   chan instance
	slots  chan struct{}

	mu     sync.Mutex
	closed bool
	// replacing counts background replacements, which close waits for: an engine must not be
	// closed under an instance still starting.
	replacing sync.WaitGroup
}

func newPool(size int, create func(ctx context.Context) (instance, error)) *pool {
	return &pool{create: create, idle: make(chan instance, size), slots: make(chan struct{}, size)}
}

func (p *pool) acquire(ctx context.Context) (instance, error) {
	select {
	case inst := <-p.idle:
		return inst, nil
	default:
	}
	select {
	case inst := <-p.idle:
		return inst, nil
	case p.slots <- struct{}{}:
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed {
			<-p.slots
			return nil, errPolicyClosed
		}
		inst, err := p.create(ctx)
		if err != nil {
			<-p.slots
			return nil, err
		}
		return inst, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// release returns an instance to the pool, or discards it when it can't be reused or the pool
// was closed meanwhile (so instances in flight during an unload are closed when they finish).
func (p *pool) release(inst instance) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		inst.close()
		<-p.slots
		return
	}
	if !inst.reusable() {
		// Replace it in the background, keeping its slot, so the next request finds a ready
		// instance instead of paying for a start (a one-shot WASI command, a timed-out guest).
		p.replacing.Add(1)
		p.mu.Unlock()
		inst.close()
		go func() {
			defer p.replacing.Done()
			p.replace()
		}()
		return
	}
	p.idle <- inst // never blocks: at most cap(slots) instances exist
	p.mu.Unlock()
}

func (p *pool) replace() {
	ctx, cancel := context.WithTimeout(context.Background(), replaceTimeout)
	defer cancel()
	inst, err := p.create(ctx)
	if err != nil {
		<-p.slots
		return
	}
	p.release(inst)
}

// replaceTimeout bounds starting a replacement instance in the background.
const replaceTimeout = time.Minute

// warm adds one instance to the pool ahead of the first request.
func (p *pool) warm(inst instance) {
	p.slots <- struct{}{}
	p.release(inst)
}

// close closes idle instances and waits for replacements being started; instances in use are
// closed when released.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.replacing.Wait()
	for {
		select {
		case inst := <-p.idle:
			inst.close()
			<-p.slots
		default:
			return
		}
	}
}
