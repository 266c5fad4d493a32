package registry

import (
	"sync"
	"sync/atomic"
	"testing"
)

type fakePolicy struct {
	version int
	closed  atomic.Bool
}

func (p *fakePolicy) Close() { p.closed.Store(true) }

func TestRegistry_LatestGenerationAndExplicitGeneration(t *testing.T) {
	r := New[*fakePolicy]()
	r.Put(Key{"p", 1}, &fakePolicy{version: 1})
	r.Put(Key{"p", 2}, &fakePolicy{version: 2})

	p, key, release, ok := r.Acquire("p", 0)
	if !ok || p.version != 2 || key.Generation != 2 {
		t.Fatalf("latest: got %v %v %v", p, key, ok)
	}
	release()
	p, _, release, ok = r.Acquire("p", 1)
	if !ok || p.version != 1 {
		t.Fatalf("generation 1: got %v %v", p, ok)
	}
	release()
	if _, _, _, ok := r.Acquire("p", 3); ok {
		t.Fatal("generation 3 is not loaded")
	}
	if _, _, _, ok := r.Acquire("q", 0); ok {
		t.Fatal("q is not loaded")
	}
}

func TestRegistry_ReplacedPolicyIsClosedOnlyAfterItsLastRequest(t *testing.T) {
	r := New[*fakePolicy]()
	old := &fakePolicy{version: 1}
	r.Put(Key{"p", 1}, old)
	held, _, release, _ := r.Acquire("p", 0)

	r.Put(Key{"p", 1}, &fakePolicy{version: 2})
	if held.closed.Load() {
		t.Fatal("closed while a request still held it")
	}
	if p, _, rel, _ := r.Acquire("p", 0); p.version != 2 {
		t.Fatalf("new requests must see the replacement, got %d", p.version)
	} else {
		rel()
	}
	release()
	if !old.closed.Load() {
		t.Fatal("not closed after its last request")
	}
}

func TestRegistry_RemoveAllGenerations(t *testing.T) {
	r := New[*fakePolicy]()
	a, b := &fakePolicy{}, &fakePolicy{}
	r.Put(Key{"p", 1}, a)
	r.Put(Key{"p", 2}, b)
	if !r.Remove("p", 0) || !a.closed.Load() || !b.closed.Load() || len(r.Keys()) != 0 {
		t.Fatalf("want everything removed and closed, keys %v", r.Keys())
	}
	if r.Remove("p", 0) {
		t.Fatal("removing an absent policy reports false")
	}
}

// TestRegistry_ConcurrentReplaceNeverHandsOutAClosedPolicy races readers against a writer that
// keeps replacing the policy.
func TestRegistry_ConcurrentReplaceNeverHandsOutAClosedPolicy(t *testing.T) {
	r := New[*fakePolicy]()
	r.Put(Key{"p", 1}, &fakePolicy{version: 0})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var bad atomic.Int64
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				p, _, release, ok := r.Acquire("p", 0)
				if !ok || p.closed.Load() {
					bad.Add(1)
				}
				if ok {
					release()
				}
			}
		})
	}
	for v := 1; v <= 2000; v++ {
		r.Put(Key{"p", int64(v%3 + 1)}, &fakePolicy{version: v})
		if v%3 == 0 {
			r.Remove("p", int64(v%3+2))
		}
	}
	close(stop)
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d acquisitions saw no policy or a closed one", bad.Load())
	}
}
