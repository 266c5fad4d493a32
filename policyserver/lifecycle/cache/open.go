package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"regent.dev/regent/policyserver/lifecycle/signing"
)

// Opened is a verified entry: its manifest and module, with its compiled code copied into the
// caller's private compilation cache.
type Opened struct {
	Manifest Manifest
	Wasm     []byte
}

// Open verifies every file of the entry for key and copies the compiled code into privateDir
// (a wazero compilation cache directory), so loading the module there is a cache hit. Errors
// wrap ErrNotFound, or ErrSignatureInvalid when anything fails verification — then nothing is
// copied and the caller compiles for itself.
func (c Cache) Open(key string, v *signing.Verifier, privateDir string) (Opened, error) {
	if err := validKey(key); err != nil {
		return Opened{}, err
	}
	dir := c.Dir(key)
	mb, err := v.ReadVerified(filepath.Join(dir, ManifestFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Opened{}, fmt.Errorf("%w %s for version %s", ErrNotFound, key, c.Version)
	case err != nil:
		return Opened{}, fmt.Errorf("%w: %v", ErrSignatureInvalid, err)
	}
	var m Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return Opened{}, fmt.Errorf("%w: %s: %v", ErrSignatureInvalid, ManifestFile, err)
	}
	if m.Version != c.Version || "sha256-"+strings.TrimPrefix(m.WasmDigest, "sha256:") != key {
		return Opened{}, fmt.Errorf("%w: manifest is for version %s, module %s, not %s %s", ErrSignatureInvalid, m.Version, m.WasmDigest, c.Version, key)
	}
	verified := map[string][]byte{}
	for rel, digest := range m.Files {
		if !fs.ValidPath(rel) || isSignature(rel) {
			return Opened{}, fmt.Errorf("%w: manifest names %q", ErrSignatureInvalid, rel)
		}
		b, err := v.ReadVerified(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return Opened{}, fmt.Errorf("%w: %v", ErrSignatureInvalid, err)
		}
		if Digest(b) != digest {
			return Opened{}, fmt.Errorf("%w: %s is not the file the manifest names", ErrSignatureInvalid, rel)
		}
		verified[rel] = b
	}
	wasm, ok := verified[ModuleFile]
	if !ok {
		return Opened{}, fmt.Errorf("%w: no %s", ErrSignatureInvalid, ModuleFile)
	}
	// A signature proves who signed, not what: code swapped on the shared volume before the
	// leader signed it carries a good signature. The key names the module, so hold it to that.
	if Key(wasm) != key {
		return Opened{}, fmt.Errorf("%w: %s is not the module %s names", ErrSignatureInvalid, ModuleFile, key)
	}
	for rel, b := range verified {
		if rel == ModuleFile {
			continue
		}
		if err := writeAtomic(filepath.Join(privateDir, filepath.FromSlash(rel)), b); err != nil {
			return Opened{}, fmt.Errorf("copy %s into the private cache: %w", path.Base(rel), err)
		}
	}
	return Opened{Manifest: m, Wasm: wasm}, nil
}

// writeAtomic writes through a temporary file so that wazero, reading the same private cache
// from another load, never sees half a file.
func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
