package propagator

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// rootVersions remember, per root, the resourceVersions its status had before the hub's own status
// patches. The root's status is the rollout's record: a decision taken on a root whose cache copy
// predates the hub's last patch would start from an older record. Such a reconcile waits instead;
// the patch's own watch event brings the root back. So the status can be patched without a
// resourceVersion precondition (no conflicts) and still never be computed from a record older than
// the one the hub last wrote. No expiry: the watch delivers every version after the patched one
// (or a relist the current one), and a deleted root is forgotten.
//
// A patch's own watch event, its echo, reconciles nothing: the reconcile that patched planned with
// the status it wrote. One reconcile in eight at 60,000 replicas was such an echo
// (docs/benchmarks.md, Session 28). A reconcile that finds its root behind counts on the echo, so
// it calls awaited before it reads the root again (awaitEcho).
type rootVersions struct {
	mu sync.Mutex
	m  map[types.NamespacedName]sets.Set[string]
	// echoes are the versions the hub's last status patch of each root answered with, until
	// their event.
	echoes map[types.NamespacedName]uint64
}

// behind says whether the cache's version of root predates the hub's last status patch to it.
func (v *rootVersions) behind(root types.NamespacedName, cachedRV string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	stale, ok := v.m[root]
	if !ok {
		return false
	}
	if stale.Has(cachedRV) {
		return true
	}
	delete(v.m, root)
	return false
}

// patched records a status patch that moved root from version before to after.
func (v *rootVersions) patched(root types.NamespacedName, before, after string) {
	if before == after {
		// Nothing changed on the server: the cache is not behind.
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[types.NamespacedName]sets.Set[string]{}
	}
	if v.m[root] == nil {
		v.m[root] = sets.New[string]()
	}
	v.m[root].Insert(before)
	if rv, ok := parseRV(after); ok {
		if v.echoes == nil {
			v.echoes = map[types.NamespacedName]uint64{}
		}
		v.echoes[root] = rv
	}
}

// echo says whether an event showing root at resourceVersion rv is the echo of the hub's last
// status patch of it; any event at that version or later ends the record.
func (v *rootVersions) echo(root types.NamespacedName, rv string) bool {
	n, ok := parseRV(rv)
	if !ok {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	w, ok := v.echoes[root]
	if !ok || n < w {
		return false
	}
	delete(v.echoes, root)
	return n == w
}

// awaited says a reconcile counts on the echo of the last status patch of root to requeue it.
func (v *rootVersions) awaited(root types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.echoes, root)
}

func (v *rootVersions) forget(root types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, root)
	delete(v.echoes, root)
}
