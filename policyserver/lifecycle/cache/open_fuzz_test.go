package cache_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"regent.dev/regent/policyserver/lifecycle/cache"
	"regent.dev/regent/policyserver/lifecycle/signing"
)

var (
	fuzzKeysOnce     sync.Once
	fuzzSigner       *signing.Signer
	fuzzVerifier     *signing.Verifier
	fuzzCompiledPath = "wazero-v1-amd64/0123abcd"
)

// fuzzKeys makes one signing key per process: generating one costs more than an input.
func fuzzKeys(t *testing.T) (*signing.Signer, *signing.Verifier) {
	fuzzKeysOnce.Do(func() {
		data, err := signing.NewSecretData("fuzz", time.Now(), 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if fuzzSigner, err = signing.NewSigner(data); err != nil {
			t.Fatal(err)
		}
		if fuzzVerifier, err = signing.NewVerifier(data, time.Now()); err != nil {
			t.Fatal(err)
		}
	})
	if fuzzVerifier == nil {
		t.Fatal("the signing keys failed in an earlier input")
	}
	return fuzzSigner, fuzzVerifier
}

// FuzzOpen lays out a cache entry around an arbitrary manifest and reads it with Cache.Open,
// the reader of the signed manifest and the files it names. The manifest may use placeholders
// for what the fuzzer cannot compute: @VERSION@, @WASM@ (digest of the module the key names),
// @MODULE@ (digest of the module.wasm on disk) and @COMPILED@ (digest of a compiled-code
// file). swap puts other bytes than the key's module in module.wasm, signed and named by the
// manifest, as a writer of the shared volume could before the leader signs. Open must:
//   - refuse (ErrSignatureInvalid or ErrNotFound, and nothing copied) an unsigned or tampered
//     manifest, whatever it says;
//   - on success return the module the key names, with the manifest of this version, and copy
//     into the private directory exactly the manifest's other files, with the bytes it names;
//   - write nothing outside the private directory.
func FuzzOpen(f *testing.F) {
	good := `{"version":"@VERSION@","moduleDigest":"sha256:src","wasmDigest":"@WASM@","executionMode":"opa",` +
		`"entrypoint":"policy/main","files":{"module.wasm":"@MODULE@","` + fuzzCompiledPath + `":"@COMPILED@"}}`
	module, compiled := []byte("\x00asm\x01\x00\x00\x00"), []byte("compiled code")
	for _, seed := range []struct {
		manifest string
		swap     bool
		sig      uint8
	}{
		{good, false, 0},
		{good, true, 0},
		{good, false, 1},
		{good, false, 2},
		{`{"version":"@VERSION@","wasmDigest":"@WASM@","files":{"module.wasm":"@MODULE@"}}`, false, 0},
		{`{"version":"@VERSION@","wasmDigest":"@WASM@","files":{"module.wasm":"@MODULE@","../escape":"@COMPILED@"}}`, false, 0},
		{`{"version":"@VERSION@","wasmDigest":"@WASM@","files":{"module.wasm":"@MODULE@","/etc/passwd":"@COMPILED@"}}`, false, 0},
		{`{"version":"@VERSION@","wasmDigest":"@WASM@","files":{"module.wasm":"@MODULE@","entry.json":"@COMPILED@"}}`, false, 0},
		{`{"version":"@VERSION@","wasmDigest":"@WASM@","files":{"module.wasm.sig":"@MODULE@"}}`, false, 0},
		{`{"version":"@VERSION@","wasmDigest":"@WASM@","files":{}}`, false, 0},
		{`{"version":"v0","wasmDigest":"@WASM@","files":{"module.wasm":"@MODULE@"}}`, false, 0},
		{`{"version":"@VERSION@","wasmDigest":"sha256:@WASM@","files":null}`, false, 0},
		{`[]`, false, 0},
		{`{"files":`, false, 0},
	} {
		f.Add([]byte(seed.manifest), module, compiled, seed.swap, seed.sig)
	}
	f.Fuzz(func(t *testing.T, manifest, module, compiled []byte, swap bool, sig uint8) {
		signer, verifier := fuzzKeys(t)
		root, private := t.TempDir(), t.TempDir()
		c := cache.Cache{Root: filepath.Join(root, "shared"), Version: "v1"}
		key := cache.Key(module)
		dir := c.Dir(key)
		onDisk := module
		if swap {
			onDisk = append([]byte("swapped "), module...)
		}
		manifest = bytes.ReplaceAll(manifest, []byte("@VERSION@"), []byte(c.Version))
		manifest = bytes.ReplaceAll(manifest, []byte("@WASM@"), []byte(cache.Digest(module)))
		manifest = bytes.ReplaceAll(manifest, []byte("@MODULE@"), []byte(cache.Digest(onDisk)))
		manifest = bytes.ReplaceAll(manifest, []byte("@COMPILED@"), []byte(cache.Digest(compiled)))
		writeSigned(t, signer, filepath.Join(dir, cache.ModuleFile), onDisk)
		writeSigned(t, signer, filepath.Join(dir, filepath.FromSlash(fuzzCompiledPath)), compiled)
		writeSigned(t, signer, filepath.Join(dir, cache.ManifestFile), manifest)
		sig %= 3
		switch mp := filepath.Join(dir, cache.ManifestFile); sig {
		case 1: // unsigned
			if err := os.Remove(mp + signing.SignatureSuffix); err != nil {
				t.Fatal(err)
			}
		case 2: // changed after signing
			if err := os.WriteFile(mp, append(manifest, ' ', '0'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := tree(t, root)

		opened, err := c.Open(key, verifier, private)
		if !sameFiles(before, tree(t, root)) {
			t.Fatalf("Open wrote outside the private directory: %v, then %v", before, tree(t, root))
		}
		copied := tree(t, private)
		if err != nil {
			if !errors.Is(err, cache.ErrSignatureInvalid) && !errors.Is(err, cache.ErrNotFound) {
				t.Fatalf("Open failed with neither ErrSignatureInvalid nor ErrNotFound: %v", err)
			}
			if len(copied) != 0 {
				t.Fatalf("Open refused the entry (%v) but copied %v", err, copied)
			}
			return
		}
		if sig != 0 {
			t.Fatalf("Open accepted a manifest that is %s", map[uint8]string{1: "unsigned", 2: "changed after signing"}[sig])
		}
		if cache.Key(opened.Wasm) != key || opened.Manifest.Version != c.Version {
			t.Fatalf("Open of %s returned a module with key %s and a manifest for version %q", key, cache.Key(opened.Wasm), opened.Manifest.Version)
		}
		want := map[string]string{}
		for rel, digest := range opened.Manifest.Files {
			if rel != cache.ModuleFile {
				want[rel] = digest
			}
		}
		if !sameFiles(want, copied) {
			t.Fatalf("copied %v into the private directory, the manifest names %v", copied, want)
		}
	})
}

func writeSigned(t *testing.T, s *signing.Signer, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.SignFile(path); err != nil {
		t.Fatal(err)
	}
}

// tree maps every regular file under dir (slash-separated, relative) to its digest.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = cache.Digest(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameFiles(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
