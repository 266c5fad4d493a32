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

// Build compiles src into a new entry, signs every file and publishes the entry atomically
// (a rename), replacing one that exists. Errors wrap ErrCompile or ErrSign.
func (c Cache) Build(ctx context.Context, src Source, signer *signing.Signer) (string, error) {
	key := Key(src.Wasm)
	if err := os.MkdirAll(filepath.Join(c.Root, c.Version), 0o755); err != nil {
		return "", fmt.Errorf("%w: %v", ErrSign, err)
	}
	// A dot directory beside the entries: never mistaken for an entry, on the same filesystem
	// so the rename that publishes it is atomic.
	staging, err := os.MkdirTemp(filepath.Join(c.Root, c.Version), "."+key+"-")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrSign, err)
	}
	defer os.RemoveAll(staging)

	e, err := engine.New(ctx, engine.Options{CacheDir: staging})
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrCompile, err)
	}
	_, err = e.Precompile(ctx, src.Wasm)
	_ = e.Close(ctx) // flushes nothing more: wazero writes each compiled module as it goes
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrCompile, err)
	}
	if err := os.WriteFile(filepath.Join(staging, ModuleFile), src.Wasm, 0o644); err != nil {
		return "", fmt.Errorf("%w: %v", ErrSign, err)
	}
	if stagedHook != nil {
		stagedHook(staging)
	}
	m := Manifest{
		Version: c.Version, ModuleDigest: src.ModuleDigest, WasmDigest: Digest(src.Wasm),
		ExecutionMode: src.ExecutionMode, Entrypoint: src.Entrypoint, Files: map[string]string{},
	}
	err = filepath.WalkDir(staging, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(staging, path)
		m.Files[filepath.ToSlash(rel)] = Digest(b)
		return signer.SignFile(path)
	})
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrSign, err)
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrSign, err)
	}
	manifest := filepath.Join(staging, ManifestFile)
	if err := os.WriteFile(manifest, mb, 0o644); err != nil {
		return "", fmt.Errorf("%w: %v", ErrSign, err)
	}
	if err := signer.SignFile(manifest); err != nil {
		return "", fmt.Errorf("%w: %v", ErrSign, err)
	}
	if err := os.Chmod(staging, 0o755); err != nil { // MkdirTemp makes it 0700; replicas may run as other users
		return "", fmt.Errorf("%w: %v", ErrSign, err)
	}
	final := c.Dir(key)
	if err := os.RemoveAll(final); err != nil {
		return "", fmt.Errorf("%w: replace %s: %v", ErrSign, final, err)
	}
	if err := os.Rename(staging, final); err != nil {
		return "", fmt.Errorf("%w: publish %s: %v", ErrSign, final, err)
	}
	return key, nil
}

// stagedHook, when set, is called once the entry's files are in the shared staging directory
// and before the entry is published: tests swap files there, as another writer to the shared
// volume could.
var stagedHook func(staging string)

// isSignature tells signature files from the files they sign.
func isSignature(path string) bool { return strings.HasSuffix(path, signing.SignatureSuffix) }
