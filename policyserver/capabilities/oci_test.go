package capabilities

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	clocktesting "k8s.io/utils/clock/testing"

	"regent.dev/regent/policyserver/engine"
)

// testRegistry is go-containerregistry's registry on a loopback port, over TLS when asked.
type testRegistry struct {
	host string
	cas  *x509.CertPool // nil for plain http
	tr   http.RoundTripper
}

func startRegistry(t *testing.T, useTLS bool) *testRegistry {
	t.Helper()
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if !useTLS {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		return &testRegistry{host: strings.TrimPrefix(s.URL, "http://"), tr: http.DefaultTransport}
	}
	s := httptest.NewUnstartedServer(h)
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted attempt's handshake errors
	s.StartTLS()
	t.Cleanup(s.Close)
	tr := s.Client().Transport.(*http.Transport)
	return &testRegistry{host: strings.TrimPrefix(s.URL, "https://"), cas: tr.TLSClientConfig.RootCAs, tr: tr}
}

// push writes a random image under repoTag and returns its manifest digest.
func (r *testRegistry) push(t *testing.T, repoTag string) string {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithTransport(r.tr)); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func ociCall(t *testing.T, h *Host, operation, image string) ([]byte, error) {
	t.Helper()
	payload, _ := json.Marshal(image)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return h.Call(ctx, engine.HostCall{Binding: "kubewarden", Namespace: "oci", Operation: operation, Payload: payload})
}

func digestOf(t *testing.T, raw []byte) string {
	t.Helper()
	var out struct {
		Digest string `json:"digest"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return out.Digest
}

func TestOCI_ManifestDigest_ByTagOrDigest_IsTheRegistrysDigest_CachedForAMinute(t *testing.T) {
	reg := startRegistry(t, false)
	want := reg.push(t, "apps/web:v1")
	clk := clocktesting.NewFakeClock(time.Now())
	h, err := New(Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for _, image := range []string{reg.host + "/apps/web:v1", reg.host + "/apps/web@" + want} {
		raw, err := ociCall(t, h, "v1/manifest_digest", image)
		if err != nil {
			t.Fatal(err)
		}
		if got := digestOf(t, raw); got != want {
			t.Fatalf("%s: digest %s, want %s", image, got, want)
		}
	}
	raw, err := ociCall(t, h, "v1/oci_manifest", reg.host+"/apps/web:v1")
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(raw); "sha256:"+hex.EncodeToString(sum[:]) != want {
		t.Fatalf("v1/oci_manifest is not the manifest the digest names: %s", raw)
	}

	moved := reg.push(t, "apps/web:v1")
	raw, _ = ociCall(t, h, "v1/manifest_digest", reg.host+"/apps/web:v1")
	if got := digestOf(t, raw); got != want {
		t.Fatalf("within a minute the answer is reused: got %s, want %s", got, want)
	}
	clk.Step(ociTTL)
	raw, _ = ociCall(t, h, "v1/manifest_digest", reg.host+"/apps/web:v1")
	if got := digestOf(t, raw); got != moved {
		t.Fatalf("after a minute the tag's new digest: got %s, want %s", got, moved)
	}
}

func TestOCI_TLSRegistry_IsTrustedThroughTheConfiguredCAs(t *testing.T) {
	reg := startRegistry(t, true)
	want := reg.push(t, "apps/web:v1")
	without, _ := New(Options{})
	if _, err := ociCall(t, without, "v1/manifest_digest", reg.host+"/apps/web:v1"); err == nil {
		t.Fatal("a registry whose CA is not trusted answered")
	}
	with, _ := New(Options{RegistryCAs: reg.cas})
	raw, err := ociCall(t, with, "v1/manifest_digest", reg.host+"/apps/web:v1")
	if err != nil {
		t.Fatal(err)
	}
	if got := digestOf(t, raw); got != want {
		t.Fatalf("digest %s, want %s", got, want)
	}
}

func TestOCI_Failures_NameTheImage(t *testing.T) {
	reg := startRegistry(t, false)
	h, _ := New(Options{})
	for _, tc := range []struct{ image, want string }{
		{reg.host + "/apps/missing:v1", "oci v1/manifest_digest " + reg.host + "/apps/missing:v1"},
		{"127.0.0.1:1/apps/web:v1", "connection refused"},
		{"Not A Reference", "oci v1/manifest_digest: could not parse reference"},
	} {
		if _, err := ociCall(t, h, "v1/manifest_digest", tc.image); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error containing %q, got %v", tc.image, tc.want, err)
		}
	}
}
