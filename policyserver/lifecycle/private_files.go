package lifecycle

import (
	"io/fs"
	"os"
	"path/filepath"

	"regent.dev/regent/policyserver/lifecycle/cache"
	"regent.dev/regent/policyserver/registry"
)

// privateFiles tracks which files of a replica's private directory serve which module, so that
// a module no longer loaded by any revision leaves nothing behind: every new generation with a
// new module copies its compiled code there (or compiles it there), and a long-lived replica
// would otherwise keep them all.
type privateFiles struct {
	dir    string
	byKey  map[string]map[string]bool // module cache key → absolute paths
	keyOf  map[registry.Key]string    // loaded revision → module cache key
	before map[string]bool
}

func newPrivateFiles(dir string) *privateFiles {
	return &privateFiles{dir: dir, byKey: map[string]map[string]bool{}, keyOf: map[registry.Key]string{}}
}

// beginLoad notes what is there before a load, so what the load adds (the engine compiling
// into its cache) can be told apart.
func (p *privateFiles) beginLoad() { p.before = p.list() }

// loaded attributes to the revision's module the files a load used or added: the module file,
// the compiled code copied from the cache entry (which may have been there already), and
// whatever appeared since beginLoad.
func (p *privateFiles) loaded(rev registry.Key, wasm []byte, modPath string, opened cache.Opened) {
	key := cache.Key(wasm)
	set := p.byKey[key]
	if set == nil {
		set = map[string]bool{}
		p.byKey[key] = set
	}
	set[modPath] = true
	for rel := range opened.Manifest.Files {
		if rel != cache.ModuleFile {
			set[filepath.Join(p.dir, filepath.FromSlash(rel))] = true
		}
	}
	for f := range p.list() {
		if !p.before[f] {
			set[f] = true
		}
	}
	p.keyOf[rev] = key
}

func (p *privateFiles) unloaded(rev registry.Key) { delete(p.keyOf, rev) }

// sweep removes every file no loaded revision needs. It runs under the replica's lock, so no
// load is writing meanwhile.
func (p *privateFiles) sweep() (removed int) {
	needed := map[string]bool{}
	keys := map[string]bool{}
	for _, key := range p.keyOf {
		keys[key] = true
		for f := range p.byKey[key] {
			needed[f] = true
		}
	}
	for key := range p.byKey {
		if !keys[key] {
			delete(p.byKey, key)
		}
	}
	for f := range p.list() {
		if !needed[f] && os.Remove(f) == nil {
			removed++
		}
	}
	return removed
}

func (p *privateFiles) list() map[string]bool {
	out := map[string]bool{}
	_ = filepath.WalkDir(p.dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			out[path] = true
		}
		return nil
	})
	return out
}
