package propagator

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// expectationTTL bounds how long a write may stay unseen by the cache before the replica is
// compared again; it covers a write whose object was deleted before the cache saw it and a relist
// skipped both. Five minutes, as the ReplicaSet controller's expectations: on a loaded hub the cache
// can lag well behind the writes, and at 30 s a 10,000-replica propagation on a machine at load
// 40–50 re-sent 3,131 creates the apiserver answered "already exists".
const expectationTTL = 5 * time.Minute

// expectations remember, per replica, the resourceVersions that precede the hub's last write to
// it. While the cache still shows one of them it has not seen that write, and comparing against it
// would only send the same write again; the write's own watch event requeues the root. This is
// what keeps a large propagation at one request per replica write.
//
// A large propagation holds one per replica until the cache catches up (150,000 on a large
// fleet), so an entry is small: its few stale versions in a slice rather than a set (a map costs
// ~300 bytes however few it holds), its key's strings shared with the cache's (intern), and the
// map is dropped once empty (a Go map keeps the buckets of its largest size).
type expectations struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*expectation
}

type expectation struct {
	stale []string
	last  string
	at    time.Time
}

// pending says whether the cache has not yet seen the hub's last write to key; cachedRV is ""
// when the cache has no such object.
func (x *expectations) pending(key types.NamespacedName, cachedRV string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.m[key]
	if !ok {
		return false
	}
	if slices.Contains(e.stale, cachedRV) && time.Since(e.at) < expectationTTL {
		return true
	}
	delete(x.m, key)
	if len(x.m) == 0 {
		x.m = nil
	}
	return false
}

// wrote records a write to key that moved it from version before ("" when it did not exist) to
// after.
func (x *expectations) wrote(key types.NamespacedName, before, after string) {
	x.mu.Lock()
	defer x.mu.Unlock()
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
	e.last, e.at = after, time.Now()
}

func appendNew(versions []string, v string) []string {
	if slices.Contains(versions, v) {
		return versions
	}
	return append(versions, v)
}
