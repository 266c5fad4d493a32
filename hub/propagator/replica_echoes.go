package propagator

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// replicaEchoes remember the resourceVersion of the hub's last update of each replica (its spec,
// or the rollout status it writes) until the update's own watch event, its echo, arrives. The
// reconcile that wrote it planned with it, so the echo reconciles nothing: a turn's 100 enforce
// updates of a 3,000-cluster root used to reconcile it once or twice more after the batch, about a
// third of the hub's reconciles at 60,000 replicas (docs/benchmarks.md, Session 28).
//
// An echo still reconciles its root where a reconcile counts on it: one that left the replica alone
// because the cache had not shown the write yet (expectations.pending) calls awaited, and one
// between its read of the cache and that comparison shows in expectations.readingReplicas.
// Creations are not recorded: a pass that creates replicas leaves their rollout status to the
// next one, which their echoes start (writeReplicas).
//
// An entry ends with its echo, or with any later event of its replica: an echo that reached the
// handler before the write was recorded (the watch outran the write's answer) leaves an entry
// that the replica's next event, its cluster's answer, removes.
type replicaEchoes struct {
	mu sync.Mutex
	m  map[types.NamespacedName]uint64
}

// wrote records that the hub's update of key left it at resourceVersion rv.
func (e *replicaEchoes) wrote(key types.NamespacedName, rv string) {
	v, ok := parseRV(rv)
	if !ok {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[types.NamespacedName]uint64{}
	}
	e.m[types.NamespacedName{Namespace: intern(key.Namespace), Name: intern(key.Name)}] = v
}

// awaited says a reconcile left key alone until the cache shows the hub's last write to it, or
// that key is gone: its next event must reconcile the root.
func (e *replicaEchoes) awaited(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.m[key]; !ok {
		return
	}
	delete(e.m, key)
	if len(e.m) == 0 {
		e.m = nil
	}
}

// echo says whether an event showing key at resourceVersion rv is the hub's own last update of it.
func (e *replicaEchoes) echo(key types.NamespacedName, rv string) bool {
	v, ok := parseRV(rv)
	if !ok {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	w, ok := e.m[key]
	if !ok || v < w {
		// None, or an older event still on its way.
		return false
	}
	delete(e.m, key)
	if len(e.m) == 0 {
		e.m = nil
	}
	return v == w
}
