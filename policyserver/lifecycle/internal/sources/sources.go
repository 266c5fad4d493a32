// Package sources serves policy modules the way the lifecycle's tests need them: an in-process
// OCI registry holding Kubewarden policy artifacts and a TLS https server, both real servers.
package sources

import (
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"

	"regent.dev/regent/policyserver/lifecycle/pull"
)

// Registry is an OCI registry on a loopback port (plain http, which go-containerregistry allows
// for loopback addresses).
type Registry struct{ Host string }

// NewRegistry starts a registry for the test.
func NewRegistry(t testing.TB) *Registry {
	s := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(s.Close)
	return &Registry{Host: strings.TrimPrefix(s.URL, "http://")}
}

// Push stores module as a policy artifact under repoTag and returns its registry:// reference.
func (r *Registry) Push(t testing.TB, repoTag string, module []byte) string {
	t.Helper()
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: static.NewLayer(module, pull.WasmLayerMediaType)})
	if err != nil {
		t.Fatal(err)
	}
	return r.PushImage(t, repoTag, img)
}

// PushImage stores img under repoTag and returns its registry:// reference.
func (r *Registry) PushImage(t testing.TB, repoTag string, img v1.Image) string {
	t.Helper()
	ref, err := name.ParseReference(r.Host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	return "registry://" + r.Host + "/" + repoTag
}

// Digest is the manifest digest of the artifact at repoTag, what a reference pins.
func (r *Registry) Digest(t testing.TB, repoTag string) string {
	t.Helper()
	ref, err := name.ParseReference(r.Host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref)
	if err != nil {
		t.Fatal(err)
	}
	return desc.Digest.String()
}

// HTTPS serves files over TLS.
type HTTPS struct {
	URL string
	CAs *x509.CertPool
	dir string
}

// NewHTTPS starts a TLS file server for the test.
func NewHTTPS(t testing.TB) *HTTPS {
	dir := t.TempDir()
	s := httptest.NewTLSServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(s.Close)
	return &HTTPS{URL: s.URL, CAs: s.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, dir: dir}
}

// Put serves content at /name and returns its URL.
func (h *HTTPS) Put(t testing.TB, name string, content []byte) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, name), content, 0o644); err != nil {
		t.Fatal(err)
	}
	return h.URL + "/" + name
}
