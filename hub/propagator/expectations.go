package propagator

import (
	"slices"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// expectationTTL is how long a write whose resourceVersion the hub does not know (a create answered
// "already exists") may stay unseen by a cache that has stopped moving before the replica is
// compared again. A write whose version it knows stays expected until the cache passes that
// version, up to expectationMax: a loaded hub at 150,000 replicas lagged its own writes by more
// than five minutes and re-sent 28,423 creates the apiserver answered "already exists" under a
// fixed five-minute TTL, and a hub whose cache stops receiving events for minutes (a watch that
// sat silent until the reflector restarted it) re-sent 9,503 more after its writes ended. A
// cache that passed the write and still shows an older version saw the object change or go:
// that write is released at once.
const (
	expectationTTL = 5 * time.Minute
	expectationMax = 30 * time.Minute
)

// relistQuiet is how long after the informer last handed over an object out of version order
// its highest version is not taken for how far the cache got. A relist (after a watch the
// apiserver closed on a slow hub, or whose version expired) replaces the cache one object at a
// time in name order: meanwhile the cache may show a replica written after the one it still lacks.
// Taken at its word, that released expectations for replicas the relist had yet to reach, and the
// hub created them again: 31,713 "already exists" at 150,000 replicas, 24,633 more while idle.
const relistQuiet = 10 * time.Second

// expectations remember, per replica, the resourceVersions that precede the hub's last write to
// it. While the cache still shows one of them it has not seen that write, and comparing against it
// would only send the same write again; the write's own watch event requeues the root. This is
// what keeps a large propagation at one request per replica write.
//
// An entry lives until the informer hands the write over (observed), or, when a reconcile of its
// root was reading the cache meanwhile, until that root's next comparison: a large propagation
// holds one per write on its way, tens of thousands at 150,000 replicas. So an entry is small: its
// few stale versions in a slice rather than a set (a map costs ~300 bytes however few it holds),
// its key's strings shared with the cache's (intern), and the map is dropped once empty (a Go map
// keeps the buckets of its largest size).
type expectations struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*expectation
	// seen is the highest resourceVersion the Policy informer has handed to its handlers (after
	// its store took it: the cache shows everything up to it), rose when it last grew; tracking
	// says the informer reports it at all. Clock is the real one when nil.
	seen     uint64
	rose     time.Time
	tracking bool
	// reordered is when the informer last handed over an object no newer than seen: a relist,
	// a resync or a handler's initial list, none of which moves in version order.
	reordered time.Time
	// reading holds the replica name (one per root) of each reconcile between its read of the
	// cache and its comparison (pending): a write the cache shows meanwhile is released by that
	// comparison, not by observed, which would leave the reconcile holding an older object than
	// the write with nothing saying so.
	reading map[string]bool
	clock   clock.PassiveClock
}

type expectation struct {
	stale []string
	last  string
	at    time.Time
}

// pending says whether the cache has not yet seen the hub's last write to key; cachedRV is ""
// when the cache has no such object, read after mark was taken.
func (x *expectations) pending(key types.NamespacedName, cachedRV string, mark cacheMark) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.m[key]
	if !ok {
		return false
	}
	if slices.Contains(e.stale, cachedRV) && x.unseen(e, mark) {
		return true
	}
	x.forget(key)
	return false
}

// unseen says whether the cache, as read after mark, can still be on its way to the write e
// expects.
func (x *expectations) unseen(e *expectation, mark cacheMark) bool {
	now := x.now()
	written, known := parseRV(e.last)
	switch {
	case mark.tracking && known && mark.seen >= written && !mark.reordering && !x.reordering(now):
		// The cache passed the write and shows an older version: the object changed since.
		return false
	case mark.tracking && known && mark.seen >= written:
		// Passed by a relist that may not have reached this object yet (or had not when the
		// cache was read): the reconcile after the relist settles compares it again.
		return now.Sub(e.at) < expectationMax
	case mark.tracking && known:
		// Not reached yet: the write's own event is still to come, however late (a starved
		// hub, a watch that sat silent until the reflector restarted it). A write whose object
		// went before the cache saw it is released as soon as any later Policy event arrives.
		return now.Sub(e.at) < expectationMax
	case now.Sub(e.at) < expectationTTL:
		return true
	}
	// A write whose version is unknown (a create answered "already exists"): past the TTL only a
	// cache still moving keeps it expected.
	return mark.tracking && now.Sub(x.rose) < expectationTTL && now.Sub(e.at) < expectationMax
}

// cacheMark is how far the cache had got when a reconcile read it: the cache it read showed at
// least that much. Comparing with the progress at the time of the comparison instead would take
// a write the cache reached after the read for one the read object should have shown.
type cacheMark struct {
	seen     uint64
	tracking bool
	// reordering says a relist was under way: the cache read may lack objects older than seen.
	reordering bool
	// replica is the replica name markReading held, if any.
	replica string
}

// mark is taken before the cache is read.
func (x *expectations) mark() cacheMark {
	x.mu.Lock()
	defer x.mu.Unlock()
	return cacheMark{seen: x.seen, tracking: x.tracking, reordering: x.reordering(x.now())}
}

// markReading is mark for a reconcile about to read the replicas named replica (one root's) and
// compare them: until doneReading, observed leaves their expectations to that comparison.
func (x *expectations) markReading(replica string) cacheMark {
	m := x.mark()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.reading == nil {
		x.reading = map[string]bool{}
	}
	x.reading[replica] = true
	m.replica = replica
	return m
}

// doneReading ends markReading's hold; a second call does nothing.
func (x *expectations) doneReading(m cacheMark) {
	if m.replica == "" {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.reading, m.replica)
}

// readingReplicas says whether a reconcile of the root whose replicas are named replica is between
// markReading and doneReading: a write the cache shows meanwhile may be one it read too early.
func (x *expectations) readingReplicas(replica string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.reading[replica]
}

func (x *expectations) reordering(now time.Time) bool {
	return !x.reordered.IsZero() && now.Sub(x.reordered) < relistQuiet
}

// settling says whether a relist is under way or just ended, and when a pending replica held for
// it should be compared again.
func (x *expectations) settling() (bool, time.Duration) {
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.now()
	if !x.reordering(now) {
		return false, 0
	}
	return true, relistQuiet - now.Sub(x.reordered) + time.Second
}

// recheck is when a root that left waiting replicas alone is compared again, given the retry it
// already has (0 for none): a replica held for a relist that then finds it gone sends no event of
// its own, so the root is looked at once the relist settles.
func (x *expectations) recheck(waiting int, retry time.Duration) time.Duration {
	settling, after := x.settling()
	if !settling || waiting == 0 || (retry > 0 && retry <= after) {
		return retry
	}
	return after
}

// observed records that the cache holds everything up to the resourceVersion of obj, a Policy the
// informer hands to its handlers (a tombstone on delete).
func (x *expectations) observed(obj any) {
	d, tombstone := obj.(toolscache.DeletedFinalStateUnknown)
	if tombstone {
		obj = d.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	rv, ok := parseRV(o.GetResourceVersion())
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.now()
	x.tracking = true
	switch {
	case rv > x.seen:
		x.seen, x.rose = rv, now
	case x.seen > 0:
		// A watch hands objects over in version order; this one came from a list.
		if !x.reordering(now) {
			cacheRelists.Inc()
		}
		x.reordered = now
	}
	// The cache now holds this object at the hub's last write to it or later (any version but
	// the ones it replaced, for a write whose version is unknown): the next comparison would
	// release the write, so it is released here. A large propagation then holds an expectation
	// only for writes still on their way, not for every replica of every root whose next
	// reconcile is queued behind the others' first (~114,000, 15 MB, at 150,000 replicas). A
	// tombstone (the last object a relist did not find) says nothing of the version the object
	// went at: its root's comparison decides.
	if tombstone || x.m == nil {
		return
	}
	key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
	e, ok := x.m[key]
	if !ok || x.reading[key.Name] {
		return
	}
	if last, known := parseRV(e.last); (known && rv >= last) || (!known && !slices.Contains(e.stale, o.GetResourceVersion())) {
		x.forget(key)
	}
}

func (x *expectations) forget(key types.NamespacedName) {
	delete(x.m, key)
	if len(x.m) == 0 {
		x.m = nil
	}
}

// progress is the informer's event handler feeding observed.
func (x *expectations) progress() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { x.observed(obj) },
		UpdateFunc: func(_, obj any) { x.observed(obj) },
		DeleteFunc: func(obj any) { x.observed(obj) },
	}
}

func (x *expectations) now() time.Time {
	if x.clock == nil {
		return time.Now()
	}
	return x.clock.Now()
}

// parseRV reads a resourceVersion as the etcd revision it is on a kube-apiserver (the API calls it
// opaque: a version that does not parse is simply not compared).
func parseRV(rv string) (uint64, bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	return n, err == nil && rv != ""
}

// wrote records a write to key that moved it from version before ("" when it did not exist) to
// after.
func (x *expectations) wrote(key types.NamespacedName, before, after string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if written, known := parseRV(after); known && x.tracking && x.seen >= written && !x.reordering(x.now()) && !x.reading[key.Name] {
		// Its watch event came first: the cache already holds it (see observed).
		if x.m != nil {
			x.forget(key)
		}
		return
	}
	if x.m == nil {
		x.m = map[types.NamespacedName]*expectation{}
	}
	e, ok := x.m[key]
	if !ok {
		e = &expectation{}
		x.m[types.NamespacedName{Namespace: intern(key.Namespace), Name: intern(key.Name)}] = e
	}
	e.stale = appendNew(e.stale, before)
	if e.last != "" {
		e.stale = appendNew(e.stale, e.last)
	}
	e.last, e.at = after, x.now()
}

func appendNew(versions []string, v string) []string {
	if slices.Contains(versions, v) {
		return versions
	}
	return append(versions, v)
}
