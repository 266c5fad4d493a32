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
	m, verified, _, err := c.readVerified(key, v)
	if err != nil {
		return Opened{}, err
	}
	for rel, b := range verified {
		if rel == ModuleFile || rel == ManifestFile {
			continue
		}
		if err := writeAtomic(filepath.Join(privateDir, filepath.FromSlash(rel)), b); err != nil {
			return Opened{}, fmt.Errorf("copy %s into the private cache: %w", path.Base(rel), err)
		}
	}
	return Opened{Manifest: m, Wasm: verified[ModuleFile]}, nil
}

// readVerified reads the entry for key from disk and verifies it (verifyEntry); besides the
// verified files it returns the manifest's bytes and every signature, which is what a leader
// sends a replica.
func (c Cache) readVerified(key string, v *signing.Verifier) (m Manifest, files, sigs map[string][]byte, err error) {
	if err := validKey(key); err != nil {
		return Manifest{}, nil, nil, err
	}
	dir := c.Dir(key)
	sigs = map[string][]byte{}
	read := func(rel string) ([]byte, []byte, error) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		content, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, err
		}
		sig, err := os.ReadFile(p + signing.SignatureSuffix)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w: %v", p, signing.ErrBadSignature, err)
		}
		sigs[rel] = sig
		return content, sig, nil
	}
	m, files, err = c.verifyEntry(key, v, read)
	return m, files, sigs, err
}

// verifyEntry checks the entry for key whose files (and signatures) read returns: the signed
// manifest is for this version and key, every file it names is signed and has the digest it
// names, and the module is the one the key names. The files returned, the manifest's bytes
// under ManifestFile among them, are the bytes verified, so a file swapped after the check is
// never used. Errors wrap ErrNotFound (no manifest) or ErrSignatureInvalid.
func (c Cache) verifyEntry(key string, v *signing.Verifier, read func(rel string) (content, sig []byte, err error)) (Manifest, map[string][]byte, error) {
	checked := func(rel string) ([]byte, error) {
		content, sig, err := read(rel)
		if err != nil {
			return nil, err
		}
		if err := v.Verify(content, sig); err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		return content, nil
	}
	mb, err := checked(ManifestFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Manifest{}, nil, fmt.Errorf("%w %s for version %s", ErrNotFound, key, c.Version)
	case err != nil:
		return Manifest{}, nil, fmt.Errorf("%w: %v", ErrSignatureInvalid, err)
	}
	var m Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return Manifest{}, nil, fmt.Errorf("%w: %s: %v", ErrSignatureInvalid, ManifestFile, err)
	}
	if m.Version != c.Version || "sha256-"+strings.TrimPrefix(m.WasmDigest, "sha256:") != key {
		return Manifest{}, nil, fmt.Errorf("%w: manifest is for version %s, module %s, not %s %s", ErrSignatureInvalid, m.Version, m.WasmDigest, c.Version, key)
	}
	verified := map[string][]byte{ManifestFile: mb}
	for rel, digest := range m.Files {
		if !fs.ValidPath(rel) || isSignature(rel) || rel == ManifestFile {
			return Manifest{}, nil, fmt.Errorf("%w: manifest names %q", ErrSignatureInvalid, rel)
		}
		b, err := checked(rel)
		if err != nil {
			return Manifest{}, nil, fmt.Errorf("%w: %v", ErrSignatureInvalid, err)
		}
		if Digest(b) != digest {
			return Manifest{}, nil, fmt.Errorf("%w: %s is not the file the manifest names", ErrSignatureInvalid, rel)
		}
		verified[rel] = b
	}
	wasm, ok := verified[ModuleFile]
	if !ok {
		return Manifest{}, nil, fmt.Errorf("%w: no %s", ErrSignatureInvalid, ModuleFile)
	}
	// The key names the module: a signed entry whose module is another one (signed by a leader
	// that was fooled) is not this key's entry.
	if Key(wasm) != key {
		return Manifest{}, nil, fmt.Errorf("%w: %s is %s, not the module of key %s", ErrSignatureInvalid, ModuleFile, Digest(wasm), key)
	}
	return m, verified, nil
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
