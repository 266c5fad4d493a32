package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// Inventory is the cluster state a Gatekeeper policy's referential constraints read as
// data.inventory, laid out as Gatekeeper replicates it:
//
//	data.inventory.cluster[<groupVersion>][<Kind>][<name>]                   cluster-scoped
//	data.inventory.namespace[<namespace>][<groupVersion>][<Kind>][<name>]    namespaced
//
// where groupVersion is an object's apiVersion ("v1", "networking.k8s.io/v1").
//
// Objects are added and removed one at a time (an informer's events) and each is kept as its
// compact JSON, so a change costs one object. Before an evaluation, an OPA instance whose data
// is behind patches the changed objects into the data document in its heap (OPA's
// opa_value_add_path / opa_value_remove_path); only an instance too far behind, or whose heap
// has collected too much replaced data, re-reads the whole document, which is built at most
// once per version. Changes are applied between evaluations, never during one, so an
// evaluation reads one consistent snapshot. It is safe for concurrent use.
type Inventory struct {
	mu      sync.Mutex
	objects map[inventoryKey][]byte
	version uint64
	// snap is the data document of version snapVersion; rebuilt lazily.
	snap        []byte
	snapVersion uint64
	// log holds the changes after version logBase, so an instance that has loaded a version
	// at or after logBase patches just those objects into its data instead of re-reading it
	// all. It is bounded: past maxInventoryLog changes it restarts, and instances further
	// behind reload the snapshot.
	log     []inventoryChange
	logBase uint64
}

// maxInventoryLog bounds the change log; beyond it a full reload is cheaper than replaying.
const maxInventoryLog = 1024

// inventoryChange is one object set (obj) or removed (obj nil) at version.
type inventoryChange struct {
	version uint64
	key     inventoryKey
	obj     []byte
}

// path is where the object sits in the data document.
func (k inventoryKey) path() []string {
	if k.namespace == "" {
		return []string{"inventory", "cluster", k.groupVersion, k.kind, k.name}
	}
	return []string{"inventory", "namespace", k.namespace, k.groupVersion, k.kind, k.name}
}

type inventoryKey struct {
	namespace, groupVersion, kind, name string
}

// NewInventory returns an empty inventory.
func NewInventory() *Inventory {
	return &Inventory{objects: map[inventoryKey][]byte{}, version: 1}
}

// inventoryObject is what an object must carry to have a place in the inventory.
type inventoryObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

func inventoryKeyOf(obj []byte) (inventoryKey, []byte, error) {
	var o inventoryObject
	if err := json.Unmarshal(obj, &o); err != nil {
		return inventoryKey{}, nil, fmt.Errorf("inventory object: %w", err)
	}
	if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
		return inventoryKey{}, nil, errors.New("inventory object needs apiVersion, kind and metadata.name")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, obj); err != nil {
		return inventoryKey{}, nil, fmt.Errorf("inventory object %s/%s: %w", o.Kind, o.Metadata.Name, err)
	}
	return inventoryKey{namespace: o.Metadata.Namespace, groupVersion: o.APIVersion, kind: o.Kind, name: o.Metadata.Name}, compact.Bytes(), nil
}

// Upsert adds obj (the JSON of a Kubernetes object) or replaces the object of the same
// apiVersion, kind, namespace and name.
func (v *Inventory) Upsert(obj []byte) error {
	k, b, err := inventoryKeyOf(obj)
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.objects[k]; ok && bytes.Equal(old, b) {
		return nil // a resync: nothing for instances to reload
	}
	v.objects[k] = b
	v.record(k, b)
	return nil
}

// record bumps the version for one object's change and logs it. Called with mu held.
func (v *Inventory) record(k inventoryKey, obj []byte) {
	v.version++
	if len(v.log) >= maxInventoryLog {
		v.log, v.logBase = nil, v.version-1
	}
	v.log = append(v.log, inventoryChange{version: v.version, key: k, obj: obj})
}

// restartLog makes every instance reload the snapshot: for changes too broad to log.
// Called with mu held, after the version is bumped.
func (v *Inventory) restartLog() {
	v.log, v.logBase = nil, v.version
}

// changesSince returns the changes after version from and the version they lead to; ok is
// false when from is older than the log, and the snapshot must be reloaded instead.
func (v *Inventory) changesSince(from uint64) (_ []inventoryChange, to uint64, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if from < v.logBase || from > v.version {
		return nil, 0, false
	}
	i := len(v.log) - int(v.version-from)
	return append([]inventoryChange(nil), v.log[i:]...), v.version, true
}

// Delete removes an object; namespace is "" for a cluster-scoped one. Removing an absent
// object is not an error (a delete event may follow a relist that already dropped it).
func (v *Inventory) Delete(apiVersion, kind, namespace, name string) {
	k := inventoryKey{namespace: namespace, groupVersion: apiVersion, kind: kind, name: name}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.objects[k]; ok {
		delete(v.objects, k)
		v.record(k, nil)
	}
}

// DeleteKind removes every object of one apiVersion and kind, for when a kind stops being
// replicated.
func (v *Inventory) DeleteKind(apiVersion, kind string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := len(v.objects)
	for k := range v.objects {
		if k.groupVersion == apiVersion && k.kind == kind {
			delete(v.objects, k)
		}
	}
	if len(v.objects) != n {
		v.version++
		v.restartLog()
	}
}

// Replace makes objs the whole inventory.
func (v *Inventory) Replace(objs [][]byte) error {
	next := make(map[inventoryKey][]byte, len(objs))
	for _, obj := range objs {
		k, b, err := inventoryKeyOf(obj)
		if err != nil {
			return err
		}
		next[k] = b
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.objects = next
	v.version++
	v.restartLog()
	return nil
}

// Len is how many objects the inventory holds.
func (v *Inventory) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.objects)
}

// snapshot returns the data document ({"inventory": …}) and its version.
func (v *Inventory) snapshot() (uint64, []byte, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.snap != nil && v.snapVersion == v.version {
		return v.version, v.snap, nil
	}
	type kinds = map[string]map[string]json.RawMessage
	cluster := map[string]kinds{}
	namespace := map[string]map[string]kinds{}
	for k, obj := range v.objects {
		var gvs map[string]kinds
		if k.namespace == "" {
			gvs = cluster
		} else {
			if namespace[k.namespace] == nil {
				namespace[k.namespace] = map[string]kinds{}
			}
			gvs = namespace[k.namespace]
		}
		if gvs[k.groupVersion] == nil {
			gvs[k.groupVersion] = kinds{}
		}
		if gvs[k.groupVersion][k.kind] == nil {
			gvs[k.groupVersion][k.kind] = map[string]json.RawMessage{}
		}
		gvs[k.groupVersion][k.kind][k.name] = obj
	}
	doc := map[string]any{"inventory": map[string]any{"cluster": cluster, "namespace": namespace}}
	b, err := json.Marshal(doc)
	if err != nil {
		return 0, nil, fmt.Errorf("marshal inventory: %w", err)
	}
	v.snap, v.snapVersion = b, v.version
	return v.version, b, nil
}
