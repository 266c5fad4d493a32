package cache_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/engine"
	"regent.dev/regent/policyserver/internal/guests"
	"regent.dev/regent/policyserver/lifecycle/cache"
	"regent.dev/regent/policyserver/lifecycle/signing"
)

func regoSource(t *testing.T) cache.Source {
	t.Helper()
	root, err := guests.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "policyserver", "testdata", "rego", "disallow-latest.rego")
	spec, err := policyserver.PolicyConfig{Module: path, ExecutionMode: "opa"}.EngineSpec(context.Background(), "latest")
	if err != nil {
		t.Fatal(err)
	}
	return cache.Source{ModuleDigest: "sha256:source", Wasm: spec.Module, ExecutionMode: "opa", Entrypoint: spec.Entrypoint}
}

func keys(t *testing.T) (*signing.Signer, *signing.Verifier) {
	data, err := signing.NewSecretData("default", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s, err := signing.NewSigner(data)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signing.NewVerifier(data, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

func compiledFiles(t *testing.T, dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, "wazero-") && !strings.HasSuffix(p, ".sig") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestCache_BuiltEntry_OpensVerifiedIntoThePrivateCacheAndLoads(t *testing.T) {
	ctx := context.Background()
	signer, verifier := keys(t)
	c := cache.Cache{Root: t.TempDir(), Version: "v1"}
	src := regoSource(t)
	key, err := c.Build(ctx, src, signer, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if key != cache.Key(src.Wasm) || !strings.Contains(c.Dir(key), filepath.Join("v1", key)) {
		t.Fatalf("key %s, dir %s", key, c.Dir(key))
	}
	if len(compiledFiles(t, c.Dir(key))) == 0 {
		t.Fatal("the entry holds no compiled code")
	}
	private := t.TempDir()
	opened, err := c.Open(key, verifier, private)
	if err != nil {
		t.Fatal(err)
	}
	if string(opened.Wasm) != string(src.Wasm) || opened.Manifest.Entrypoint != src.Entrypoint || len(compiledFiles(t, private)) == 0 {
		t.Fatalf("opened %+v", opened.Manifest)
	}
	e, err := engine.New(ctx, engine.Options{CacheDir: private})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	p, err := e.Load(ctx, engine.Spec{Name: "latest", Module: opened.Wasm, ExecutionMode: engine.ModeOPA, Entrypoint: opened.Manifest.Entrypoint})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
}

func TestCache_TamperedUnsignedOrForeignEntries_AreRefused(t *testing.T) {
	ctx := context.Background()
	signer, verifier := keys(t)
	root := t.TempDir()
	c := cache.Cache{Root: root, Version: "v1"}
	key, err := c.Build(ctx, regoSource(t), signer, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (cache.Cache{Root: root, Version: "v2"}).Open(key, verifier, t.TempDir()); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("another version: want ErrNotFound, got %v", err)
	}
	_, otherVerifier := keys(t)
	if _, err := c.Open(key, otherVerifier, t.TempDir()); !errors.Is(err, cache.ErrSignatureInvalid) {
		t.Fatalf("signed by another CA: want ErrSignatureInvalid, got %v", err)
	}
	code := compiledFiles(t, c.Dir(key))[0]
	b, _ := os.ReadFile(code)
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(code, b, 0o644); err != nil {
		t.Fatal(err)
	}
	private := t.TempDir()
	if _, err := c.Open(key, verifier, private); !errors.Is(err, cache.ErrSignatureInvalid) {
		t.Fatalf("tampered compiled code: want ErrSignatureInvalid, got %v", err)
	}
	if n := len(compiledFiles(t, private)); n != 0 {
		t.Fatalf("%d unverified files reached the private cache", n)
	}
	_ = os.Remove(filepath.Join(c.Dir(key), cache.ModuleFile+signing.SignatureSuffix))
	if _, err := c.Open(key, verifier, t.TempDir()); !errors.Is(err, cache.ErrSignatureInvalid) {
		t.Fatalf("unsigned module: want ErrSignatureInvalid, got %v", err)
	}
}

func TestCache_BadModule_IsACompileError(t *testing.T) {
	signer, _ := keys(t)
	c := cache.Cache{Root: t.TempDir(), Version: "v1"}
	_, err := c.Build(context.Background(), cache.Source{Wasm: []byte("\x00asm\x01\x00\x00\x00\xff\xff")}, signer, t.TempDir())
	if !errors.Is(err, cache.ErrCompile) {
		t.Fatalf("want ErrCompile, got %v", err)
	}
}

func TestCache_GC_RemovesEntriesNotKept_UnderEveryVersion(t *testing.T) {
	root := t.TempDir()
	keep, drop := "sha256-"+strings.Repeat("a", 64), "sha256-"+strings.Repeat("b", 64)
	for _, d := range []string{"v1/" + keep, "v1/" + drop, "v2/" + drop, "v1/.staging"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := cache.Cache{Root: root, Version: "v1"}.GC(map[string]bool{keep: true})
	if err != nil || len(removed) != 2 {
		t.Fatalf("removed %v, %v", removed, err)
	}
	for _, d := range []string{"v1/" + keep, "v1/.staging"} {
		if _, err := os.Stat(filepath.Join(root, d)); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
	}
}

// Another writer to the shared volume swaps the module and the machine code while the leader
// stages the entry: what it swapped in must never open as the entry.
func TestCache_FilesSwappedWhileStaged_DoNotOpen(t *testing.T) {
	ctx := context.Background()
	signer, verifier := keys(t)
	c := cache.Cache{Root: t.TempDir(), Version: "v1"}
	src := regoSource(t)
	evil := []byte("\x00asm\x01\x00\x00\x00 another module")
	cache.SetStagedHook(func(staging string) {
		for _, f := range append(compiledFiles(t, staging), filepath.Join(staging, cache.ModuleFile)) {
			if err := os.WriteFile(f, evil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	defer cache.SetStagedHook(nil)
	key, err := c.Build(ctx, src, signer, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	private := t.TempDir()
	opened, err := c.Open(key, verifier, private)
	if !errors.Is(err, cache.ErrSignatureInvalid) {
		t.Fatalf("an entry whose files were swapped before publishing opened (module %q, err %v)", opened.Wasm, err)
	}
	if n := len(compiledFiles(t, private)); n != 0 {
		t.Fatalf("%d swapped files reached the private cache", n)
	}
}

// A signed entry is only its key's entry when its module is the key's module: a leader fooled
// into signing another module under the key must not make replicas run it.
func TestCache_SignedModuleThatIsNotTheKeys_DoesNotOpen(t *testing.T) {
	signer, verifier := keys(t)
	c := cache.Cache{Root: t.TempDir(), Version: "v1"}
	src := regoSource(t)
	key, err := c.Build(context.Background(), src, signer, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	evil := []byte("\x00asm\x01\x00\x00\x00 another module")
	resign := func(rel string, b []byte) {
		sig, err := signer.Sign(b)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(c.Dir(key), rel)
		if os.WriteFile(p, b, 0o644) != nil || os.WriteFile(p+signing.SignatureSuffix, sig, 0o644) != nil {
			t.Fatal("rewrite", rel)
		}
	}
	resign(cache.ModuleFile, evil)
	mb, _ := os.ReadFile(filepath.Join(c.Dir(key), cache.ManifestFile))
	var m cache.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	m.Files[cache.ModuleFile] = cache.Digest(evil)
	mb, _ = json.Marshal(m)
	resign(cache.ManifestFile, mb)
	if opened, err := c.Open(key, verifier, t.TempDir()); !errors.Is(err, cache.ErrSignatureInvalid) || !strings.Contains(err.Error(), "not the module of key") {
		t.Fatalf("a signed module that is not the key's opened (module %q, err %v)", opened.Wasm, err)
	}
}
