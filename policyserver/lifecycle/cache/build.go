package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"regent.dev/regent/policyserver/engine"
	"regent.dev/regent/policyserver/lifecycle/signing"
)

var (
	// ErrCompile: the module does not compile.
	ErrCompile = errors.New("compile")
	// ErrSign: the entry could not be signed (or written).
	ErrSign = errors.New("sign")
)

// Source is a module ready to compile.
type Source struct {
	ModuleDigest  string
	Wasm          []byte
	ExecutionMode string
	Entrypoint    string
}

// Build compiles src into a new entry and publishes it, replacing one that exists. Errors wrap
// ErrCompile or ErrSign.
//
// Anyone who can write the shared volume could swap a file between the moment it is written
// there and the moment it is read back, so nothing is ever read back from it: the module is
// compiled in scratch, a directory only this process writes, every file is read into memory
// there and its digest and signature computed from those bytes, and only then are the bytes
// and their signatures copied into a staging directory of the shared cache and published by a
// rename. A file swapped in staging or after publishing no longer matches its signature.
func (c Cache) Build(ctx context.Context, src Source, signer *signing.Signer, scratch string) (string, error) {
	key := Key(src.Wasm)
	files, err := compilePrivately(ctx, src.Wasm, scratch)
	if err != nil {
		return "", err
	}
	files[ModuleFile] = src.Wasm
	m := Manifest{
		Version: c.Version, ModuleDigest: src.ModuleDigest, WasmDigest: Digest(src.Wasm),
		ExecutionMode: src.ExecutionMode, Entrypoint: src.Entrypoint, Files: map[string]string{},
	}
	for rel, b := range files {
		m.Files[rel] = Digest(b)
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrSign, err)
	}
	files[ManifestFile] = mb
	sigs := make(map[string][]byte, len(files))
	for rel, b := range files {
		if sigs[rel], err = signer.Sign(b); err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrSign, rel, err)
		}
	}
	if err := c.publish(key, files, sigs); err != nil {
		return "", fmt.Errorf("%w: %v", ErrSign, err)
	}
	return key, nil
}

// compilePrivately precompiles wasm into a fresh directory under scratch and returns every
// file wazero wrote, by its path relative to that directory (the layout of a compilation cache).
func compilePrivately(ctx context.Context, wasm []byte, scratch string) (map[string][]byte, error) {
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSign, err)
	}
	dir, err := os.MkdirTemp(scratch, StagingPrefix)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSign, err)
	}
	defer os.RemoveAll(dir)
	e, err := engine.New(ctx, engine.Options{CacheDir: dir})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCompile, err)
	}
	_, err = e.Precompile(ctx, wasm)
	_ = e.Close(ctx) // flushes nothing more: wazero writes each compiled module as it goes
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCompile, err)
	}
	files := map[string][]byte{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: read the compiled code: %v", ErrSign, err)
	}
	return files, nil
}

// publish copies the signed bytes into a staging directory of the shared cache and renames it
// to the entry's place.
func (c Cache) publish(key string, files, sigs map[string][]byte) error {
	if err := os.MkdirAll(filepath.Join(c.Root, c.Version), 0o755); err != nil {
		return err
	}
	// A dot directory beside the entries: never mistaken for an entry, on the same filesystem
	// so the rename that publishes it is atomic.
	staging, err := os.MkdirTemp(filepath.Join(c.Root, c.Version), "."+key+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(staging)
	for rel, b := range files {
		p := filepath.Join(staging, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(p+signing.SignatureSuffix, sigs[rel], 0o644); err != nil {
			return err
		}
	}
	if stagedHook != nil {
		stagedHook(staging)
	}
	if err := os.Chmod(staging, 0o755); err != nil { // MkdirTemp makes it 0700; replicas may run as other users
		return err
	}
	final := c.Dir(key)
	if err := os.RemoveAll(final); err != nil {
		return fmt.Errorf("replace %s: %w", final, err)
	}
	if err := os.Rename(staging, final); err != nil {
		return fmt.Errorf("publish %s: %w", final, err)
	}
	return nil
}

// StagingPrefix names the directories Build compiles in under its scratch directory; a leader
// killed mid-build leaves one behind, which the next one removes.
const StagingPrefix = ".build-"

// stagedHook, when set, is called once the entry's files are in the shared staging directory
// and before the entry is published: tests swap files there, as another writer to the shared
// volume could.
var stagedHook func(staging string)

// isSignature tells signature files from the files they sign.
func isSignature(path string) bool { return strings.HasSuffix(path, signing.SignatureSuffix) }
