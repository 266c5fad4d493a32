package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
)

// Files of an entry besides the compiled code.
const (
	ManifestFile = "entry.json"
	ModuleFile   = "module.wasm"
)

var (
	// ErrNotFound: no entry for this key and version.
	ErrNotFound = errors.New("no cache entry")
	// ErrSignatureInvalid: the entry exists but a file is unsigned, tampered with, or not what
	// the manifest says.
	ErrSignatureInvalid = errors.New("cache entry signature invalid")
)

// Manifest describes an entry; it is signed like every other file.
type Manifest struct {
	Version string `json:"version"`
	// ModuleDigest is the digest of the module as pulled (a .wasm, a .rego, a template).
	ModuleDigest string `json:"moduleDigest"`
	// WasmDigest is the digest of module.wasm, what the engine loads.
	WasmDigest    string `json:"wasmDigest"`
	ExecutionMode string `json:"executionMode"`
	Entrypoint    string `json:"entrypoint,omitempty"`
	// Files maps each file's path in the entry (but the manifest's) to its "sha256:<hex>".
	Files map[string]string `json:"files"`
}

// Cache is the shared cache as one policy-server version sees it.
type Cache struct {
	Root    string
	Version string
}

// Key is the cache key of a wasm module: "sha256-<hex>" of its bytes.
func Key(wasm []byte) string {
	return "sha256-" + hex.EncodeToString(sha256Sum(wasm))
}

// Dir is where the entry for key lives for this version.
func (c Cache) Dir(key string) string { return filepath.Join(c.Root, c.Version, key) }

func sha256Sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// Digest is "sha256:<hex>" of b.
func Digest(b []byte) string { return "sha256:" + hex.EncodeToString(sha256Sum(b)) }

func validKey(key string) error {
	hexPart, ok := strings.CutPrefix(key, "sha256-")
	if _, err := hex.DecodeString(hexPart); !ok || err != nil || len(hexPart) != 64 {
		return fmt.Errorf("cache key %q is not sha256-<hex>", key)
	}
	return nil
}

// DefaultVersion names this build of the policy server: Regent's module version, wazero's
// version and the platform, everything compiled code depends on. A newer build therefore finds
// no entry of an older one.
func DefaultVersion() string {
	regent, wazero := "dev", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			regent = v
		}
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				wazero = d.Version
			}
		}
	}
	return sanitize(fmt.Sprintf("regent-%s-wazero-%s-%s-%s", regent, wazero, runtime.GOARCH, runtime.GOOS))
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ' ' {
			return '_'
		}
		return r
	}, s)
}
