package pull_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"

	"regent.dev/regent/policyserver/lifecycle/internal/sources"
	"regent.dev/regent/policyserver/lifecycle/pull"
)

// A policy names its module; the policy server's own files are not modules unless the operator
// says which directories hold them, and no path leads out of those.
func TestFetch_Files_OnlyInsideTheAllowedDirectories(t *testing.T) {
	allowed, outside := t.TempDir(), t.TempDir()
	for _, d := range []string{allowed, outside} {
		if err := os.WriteFile(filepath.Join(d, "policy.wasm"), module, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(outside, "policy.wasm"), filepath.Join(allowed, "escape.wasm")); err != nil {
		t.Fatal(err)
	}
	opts := pull.Options{FileRoots: []string{allowed}}
	if _, err := pull.Fetch(context.Background(), "file://"+filepath.Join(allowed, "policy.wasm"), opts); err != nil {
		t.Fatalf("a module in the allowed directory: %v", err)
	}
	for _, tc := range []struct {
		name, ref string
		opts      pull.Options
	}{
		{"no directory allowed", "file://" + filepath.Join(allowed, "policy.wasm"), pull.Options{}},
		{"a pod file", "file:///etc/passwd", opts},
		{"a plain path outside", filepath.Join(outside, "policy.wasm"), opts},
		{"dot-dot out", "file://" + allowed + "/../" + filepath.Base(outside) + "/policy.wasm", opts},
		{"a symbolic link out", "file://" + filepath.Join(allowed, "escape.wasm"), opts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := pull.Fetch(context.Background(), tc.ref, tc.opts)
			if err == nil {
				t.Fatalf("read %d bytes from %s", len(m.Bytes), tc.ref)
			}
		})
	}
}

// An https server may redirect a pull, but not down to plain http, and not into the pod's
// network (loopback, private and link-local addresses) unless the operator allows it. The test
// servers are all on loopback, so "allowed" is the explicit option here.
func TestFetch_HTTPSRedirects_NeverToPlainHTTP_NorPrivateUnlessAllowed(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(module) }))
	defer plain.Close()
	var self string
	web := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/policy.wasm":
			_, _ = w.Write(module)
		case "/to-http":
			http.Redirect(w, r, plain.URL+"/policy.wasm", http.StatusFound)
		default:
			http.Redirect(w, r, self+"/policy.wasm", http.StatusFound)
		}
	}))
	defer web.Close()
	self = web.URL
	cas := web.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs

	_, err := pull.Fetch(context.Background(), web.URL+"/to-loopback", pull.Options{CAs: cas})
	if !errors.Is(err, pull.ErrRedirectRefused) || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("a redirect to loopback: want it refused naming the address, got %v", err)
	}
	if m, err := pull.Fetch(context.Background(), web.URL+"/to-loopback", pull.Options{CAs: cas, AllowPrivateRedirects: true}); err != nil || string(m.Bytes) != string(module) {
		t.Fatalf("allowed explicitly: %q, %v", m.Bytes, err)
	}
	_, err = pull.Fetch(context.Background(), web.URL+"/to-http", pull.Options{CAs: cas, AllowPrivateRedirects: true})
	if !errors.Is(err, pull.ErrRedirectRefused) || !strings.Contains(err.Error(), "leaves https") {
		t.Fatalf("a redirect to plain http: want it refused, got %v", err)
	}
}

// A registry redirects blob downloads (to object storage, usually); the same rule applies.
func TestFetch_RegistryBlobRedirect_ToPrivateAddresses_RefusedUnlessAllowed(t *testing.T) {
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(module) }))
	defer store.Close()
	layer := static.NewLayer(module, pull.WasmLayerMediaType)
	digest, _ := layer.Digest()
	blobs := &redirectingBlobs{BlobHandler: registry.NewInMemoryBlobHandler(), digest: digest, to: store.URL + "/blob"}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithBlobHandler(blobs)))
	defer srv.Close()
	reg := &sources.Registry{Host: strings.TrimPrefix(srv.URL, "http://")}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer})
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.PushImage(t, "policies/redirected:v1", img)

	if _, err := pull.Fetch(context.Background(), ref, pull.Options{}); !errors.Is(err, pull.ErrRedirectRefused) {
		t.Fatalf("a blob redirected to loopback: want it refused, got %v", err)
	}
	if m, err := pull.Fetch(context.Background(), ref, pull.Options{AllowPrivateRedirects: true}); err != nil || string(m.Bytes) != string(module) {
		t.Fatalf("allowed explicitly: %q, %v", m.Bytes, err)
	}
}

// redirectingBlobs serves every blob from memory but the module's, which it redirects.
type redirectingBlobs struct {
	registry.BlobHandler
	digest v1.Hash
	to     string
}

func (b *redirectingBlobs) Get(ctx context.Context, repo string, h v1.Hash) (io.ReadCloser, error) {
	if h == b.digest {
		return nil, registry.RedirectError{Location: b.to, Code: http.StatusTemporaryRedirect}
	}
	return b.BlobHandler.Get(ctx, repo, h)
}

func (b *redirectingBlobs) Stat(ctx context.Context, repo string, h v1.Hash) (int64, error) {
	return b.BlobHandler.(registry.BlobStatHandler).Stat(ctx, repo, h)
}

func (b *redirectingBlobs) Put(ctx context.Context, repo string, h v1.Hash, rc io.ReadCloser) error {
	return b.BlobHandler.(registry.BlobPutHandler).Put(ctx, repo, h, rc)
}

// A reference may pin its module: a registry artifact by its manifest digest, an https or file
// module by its own; other bytes are refused.
func TestFetch_PinnedModules_MustMatchTheirPin(t *testing.T) {
	other := []byte("\x00asm\x01\x00\x00\x00 another module")
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.wasm")
	if err := os.WriteFile(path, module, 0o644); err != nil {
		t.Fatal(err)
	}
	web := sources.NewHTTPS(t)
	url := web.Put(t, "policy.wasm", module)
	reg := sources.NewRegistry(t)
	tagged := reg.Push(t, "policies/pinned:v1", module)
	manifest := reg.Digest(t, "policies/pinned:v1")
	reg.Push(t, "policies/pinned:v2", other)
	otherManifest := reg.Digest(t, "policies/pinned:v2")
	registryAt := func(d string) string { return strings.Replace(tagged, ":v1", "@"+d, 1) }
	opts := pull.Options{CAs: web.CAs, FileRoots: []string{dir}}

	for _, ref := range []string{url + "@" + digestOf(module), "file://" + path + "@" + digestOf(module), registryAt(manifest)} {
		if m, err := pull.Fetch(context.Background(), ref, opts); err != nil || string(m.Bytes) != string(module) {
			t.Errorf("%s: %q, %v", ref, m.Bytes, err)
		}
	}
	for _, ref := range []string{url + "@" + digestOf(other), "file://" + path + "@" + digestOf(other)} {
		if _, err := pull.Fetch(context.Background(), ref, opts); !errors.Is(err, pull.ErrPinMismatch) {
			t.Errorf("%s: want ErrPinMismatch, got %v", ref, err)
		}
	}
	// The registry serves the other artifact at its digest, never this one's.
	if m, err := pull.Fetch(context.Background(), registryAt(otherManifest), opts); err != nil || string(m.Bytes) == string(module) {
		t.Errorf("another artifact's digest: %q, %v", m.Bytes, err)
	}
	if _, err := pull.Fetch(context.Background(), registryAt(digestOf(module)), opts); err == nil {
		t.Errorf("a digest no manifest has was pulled")
	}
}

func TestFetch_ModulesLargerThanTheBound_AreRefused(t *testing.T) {
	web := sources.NewHTTPS(t)
	reg := sources.NewRegistry(t)
	opts := pull.Options{CAs: web.CAs, MaxBytes: int64(len(module) - 1)}
	for _, ref := range []string{web.Put(t, "policy.wasm", module), reg.Push(t, "policies/big:v1", module)} {
		if _, err := pull.Fetch(context.Background(), ref, opts); err == nil || !strings.Contains(err.Error(), "larger than") {
			t.Errorf("%s: want it refused as too large, got %v", ref, err)
		}
	}
}
