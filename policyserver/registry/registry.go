package registry

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// Key names one loaded revision of a policy. Generation 0 is never stored: lookups use it to
// mean "the latest generation".
type Key struct {
	Name       string
	Generation int64
}

// Closer is what the registry needs of a policy: a way to unload it.
type Closer interface{ Close() }

// Registry maps keys to policies of type P.
type Registry[P Closer] struct {
	writeMu sync.Mutex
	current atomic.Pointer[snapshot[P]]
}

type snapshot[P Closer] struct {
	byName map[string]map[int64]*entry[P]
}

// entry counts the requests using a policy so that retiring it waits for them.
type entry[P Closer] struct {
	policy  P
	mu      sync.Mutex
	refs    int
	retired bool
}

func (e *entry[P]) acquire() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.retired {
		return false
	}
	e.refs++
	return true
}

func (e *entry[P]) release() {
	e.mu.Lock()
	e.refs--
	closeNow := e.retired && e.refs == 0
	e.mu.Unlock()
	if closeNow {
		e.policy.Close()
	}
}

func (e *entry[P]) retire() {
	e.mu.Lock()
	e.retired = true
	closeNow := e.refs == 0
	e.mu.Unlock()
	if closeNow {
		e.policy.Close()
	}
}

// New returns an empty registry.
func New[P Closer]() *Registry[P] {
	r := &Registry[P]{}
	r.current.Store(&snapshot[P]{byName: map[string]map[int64]*entry[P]{}})
	return r
}

// Acquire returns the policy for name at generation (0: the latest) and a release function the
// caller must call when done with it.
func (r *Registry[P]) Acquire(name string, generation int64) (P, Key, func(), bool) {
	for {
		s := r.current.Load()
		gens := s.byName[name]
		gen := generation
		if gen == 0 {
			gen = latest(gens)
		}
		e, ok := gens[gen]
		if !ok {
			var zero P
			return zero, Key{}, nil, false
		}
		if e.acquire() {
			return e.policy, Key{Name: name, Generation: gen}, e.release, true
		}
		// Retired between the load and the acquire: a newer snapshot is already in place.
	}
}

func latest[E any](gens map[int64]E) int64 {
	var max int64
	for g := range gens {
		if g > max {
			max = g
		}
	}
	return max
}

// Put adds a policy under key, replacing (and retiring) any policy already there.
func (r *Registry[P]) Put(key Key, policy P) {
	if key.Generation <= 0 {
		panic("registry: generation must be positive")
	}
	r.update(func(byName map[string]map[int64]*entry[P]) []*entry[P] {
		gens := maps.Clone(byName[key.Name])
		if gens == nil {
			gens = map[int64]*entry[P]{}
		}
		old := gens[key.Generation]
		gens[key.Generation] = &entry[P]{policy: policy}
		byName[key.Name] = gens
		if old != nil {
			return []*entry[P]{old}
		}
		return nil
	})
}

// Remove unloads one generation of a policy; generation 0 removes every generation.
func (r *Registry[P]) Remove(name string, generation int64) bool {
	removed := false
	r.update(func(byName map[string]map[int64]*entry[P]) []*entry[P] {
		gens := maps.Clone(byName[name])
		var out []*entry[P]
		for g, e := range gens {
			if generation == 0 || g == generation {
				out = append(out, e)
				delete(gens, g)
			}
		}
		if len(gens) == 0 {
			delete(byName, name)
		} else {
			byName[name] = gens
		}
		removed = len(out) > 0
		return out
	})
	return removed
}

// update applies a change to a copy of the snapshot, publishes it, then retires what the
// change dropped: after the swap no new request can reach those.
func (r *Registry[P]) update(change func(map[string]map[int64]*entry[P]) []*entry[P]) {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	next := maps.Clone(r.current.Load().byName)
	retired := change(next)
	r.current.Store(&snapshot[P]{byName: next})
	for _, e := range retired {
		e.retire()
	}
}

// Keys lists every loaded policy revision, sorted.
func (r *Registry[P]) Keys() []Key {
	var keys []Key
	for name, gens := range r.current.Load().byName {
		for g := range gens {
			keys = append(keys, Key{Name: name, Generation: g})
		}
	}
	slices.SortFunc(keys, func(a, b Key) int {
		if a.Name != b.Name {
			if a.Name < b.Name {
				return -1
			}
			return 1
		}
		return int(a.Generation - b.Generation)
	})
	return keys
}

// Latest returns the latest generation of name, 0 when it is not loaded.
func (r *Registry[P]) Latest(name string) int64 {
	return latest(r.current.Load().byName[name])
}

// Close removes and retires everything.
func (r *Registry[P]) Close() {
	r.update(func(byName map[string]map[int64]*entry[P]) []*entry[P] {
		var out []*entry[P]
		for name, gens := range byName {
			for _, e := range gens {
				out = append(out, e)
			}
			delete(byName, name)
		}
		return out
	})
}
