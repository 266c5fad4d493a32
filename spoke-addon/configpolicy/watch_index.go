package configpolicy

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// watchIndex remembers, per policy, what its last evaluation looked at, so an event on an object
// re-evaluates exactly the policies that could see a difference rather than every policy.
type watchIndex struct {
	mu       sync.RWMutex
	byKind   map[schema.GroupVersionKind]map[types.NamespacedName]map[string]bool // names; "" = any
	byPolicy map[types.NamespacedName]policyOutcome
}

func newWatchIndex() *watchIndex {
	return &watchIndex{
		byKind:   map[schema.GroupVersionKind]map[types.NamespacedName]map[string]bool{},
		byPolicy: map[types.NamespacedName]policyOutcome{},
	}
}

// set replaces what policy looks at with the refs and flags of its latest outcome.
func (w *watchIndex) set(policy types.NamespacedName, out policyOutcome) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removeLocked(policy)
	w.byPolicy[policy] = policyOutcome{refs: out.refs, usesNamespaces: out.usesNamespaces, unmapped: out.unmapped}
	for _, ref := range out.refs {
		w.addLocked(policy, ref)
	}
}

// add records that policy looks at ref, in addition to what it looked at before.
func (w *watchIndex) add(policy types.NamespacedName, ref watchRef) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o := w.byPolicy[policy]
	o.refs = append(o.refs, ref)
	w.byPolicy[policy] = o
	w.addLocked(policy, ref)
}

func (w *watchIndex) addLocked(policy types.NamespacedName, ref watchRef) {
	policies := w.byKind[ref.gvk]
	if policies == nil {
		policies = map[types.NamespacedName]map[string]bool{}
		w.byKind[ref.gvk] = policies
	}
	if policies[policy] == nil {
		policies[policy] = map[string]bool{}
	}
	policies[policy][ref.name] = true
}

func (w *watchIndex) remove(policy types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removeLocked(policy)
}

func (w *watchIndex) removeLocked(policy types.NamespacedName) {
	for _, ref := range w.byPolicy[policy].refs {
		delete(w.byKind[ref.gvk], policy)
		if len(w.byKind[ref.gvk]) == 0 {
			delete(w.byKind, ref.gvk)
		}
	}
	delete(w.byPolicy, policy)
}

// lookingAt returns the policies that look at the object of kind gvk named name.
func (w *watchIndex) lookingAt(gvk schema.GroupVersionKind, name string) []types.NamespacedName {
	w.mu.RLock()
	defer w.mu.RUnlock()
	var out []types.NamespacedName
	for policy, names := range w.byKind[gvk] {
		if names[""] || names[name] {
			out = append(out, policy)
		}
	}
	return out
}

// matching returns the policies whose last outcome satisfies f.
func (w *watchIndex) matching(f func(policyOutcome) bool) []types.NamespacedName {
	w.mu.RLock()
	defer w.mu.RUnlock()
	var out []types.NamespacedName
	for policy, o := range w.byPolicy {
		if f(o) {
			out = append(out, policy)
		}
	}
	return out
}
