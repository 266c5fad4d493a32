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
type rootVersions struct {
	mu sync.Mutex
	m  map[types.NamespacedName]sets.Set[string]
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
}

func (v *rootVersions) forget(root types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, root)
}
