package propagator

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// replicaEchoes tell the watch events of the hub's own replica spec updates, their echoes, from
// every other event. The reconcile that wrote an update planned with it, so its echo reconciles
// nothing: a turn's 100 enforce updates of a 3,000-cluster root used to reconcile it once or twice
// more after the batch (docs/benchmarks.md, Session 28).
//
// An update conditioned on the cached resourceVersion is known from the moment it is sent: the
// next version of its replica is either the update's own or one that makes it fail with a conflict.
// An event from that version is taken for the echo, so one that outruns the update's answer is
// dropped too (a quarter of them did at 60,000 replicas); once the answer is in, sent says whether
// the event taken was another version (a relist that jumped past it), and the root is requeued.
//
// A write without a precondition (the rollout status the hub applies or removes, rare) is not
// recorded: one that changes nothing answers with the replica's current version, which may be a
// spoke's report the cache has not shown yet, and that report's event would be taken for its echo.
//
// An echo still reconciles its root where a reconcile counts on it: one that left the replica alone
// because the cache had not shown the write yet (expectations.pending) calls awaited, and one
// between its read of the cache and that comparison shows in expectations.readingReplicas.
// Creations are not recorded: a pass that creates replicas leaves their rollout status to the next
// one, which their echoes start (writeReplicas).
//
// An entry ends with its echo, or with any later event of its replica.
type replicaEchoes struct {
	mu sync.Mutex
	m  map[types.NamespacedName]echo
	// missed holds the replica names (one per root) of roots an event was wrongly dropped for.
	missed map[string]bool
}

// echo is one update: the version it was conditioned on while in flight (after 0), the version
// it answered with, and the event version taken for it while in flight.
type echo struct{ before, after, taken uint64 }

// sending records an update of key conditioned on resourceVersion before, about to be sent.
func (e *replicaEchoes) sending(key types.NamespacedName, before string) {
	if v, ok := parseRV(before); ok {
		e.put(key, echo{before: v})
	}
}

// sent records the answer to the update sending recorded: the version after, or err. An event
// taken for its echo that was another version marks its root for missedFor.
func (e *replicaEchoes) sent(key types.NamespacedName, after string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w, ok := e.m[key]
	if !ok || w.after != 0 {
		return
	}
	v, known := parseRV(after)
	if err != nil || !known {
		v = 0
	}
	if w.taken == 0 && v != 0 {
		w.after = v
		e.m[key] = w
		return
	}
	e.drop(key)
	if w.taken != 0 && w.taken != v {
		if e.missed == nil {
			e.missed = map[string]bool{}
		}
		e.missed[key.Name] = true
	}
}

func (e *replicaEchoes) put(key types.NamespacedName, w echo) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[types.NamespacedName]echo{}
	}
	e.m[types.NamespacedName{Namespace: intern(key.Namespace), Name: intern(key.Name)}] = w
}

// awaited says a reconcile left key alone until the cache shows the hub's last write to it, or
// that key is gone: its next event must reconcile the root.
func (e *replicaEchoes) awaited(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.drop(key)
}

// echo says whether an update event of key from resourceVersion from to to is the hub's own last
// update of it.
func (e *replicaEchoes) echo(key types.NamespacedName, from, to string) bool {
	v, ok := parseRV(to)
	if !ok {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	w, ok := e.m[key]
	switch {
	case !ok:
		return false
	case w.after == 0:
		// In flight: the first event from the version it was conditioned on.
		if prev, known := parseRV(from); known && w.taken == 0 && prev == w.before {
			w.taken = v
			e.m[key] = w
			return true
		}
		return false
	case v < w.after:
		// An older event still on its way.
		return false
	}
	e.drop(key)
	return v == w.after
}

// missedFor says, once, whether an event of the root whose replicas are named replica was dropped
// for an echo it was not.
func (e *replicaEchoes) missedFor(replica string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.missed[replica] {
		return false
	}
	delete(e.missed, replica)
	return true
}

func (e *replicaEchoes) drop(key types.NamespacedName) {
	if _, ok := e.m[key]; !ok {
		return
	}
	delete(e.m, key)
	if len(e.m) == 0 {
		e.m = nil
	}
}
