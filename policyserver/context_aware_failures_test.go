package policyserver

import (
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
	"k8s.io/client-go/rest"

	"regent.dev/regent/policyserver/capabilities"
)

const namespaceLookup = `
ns-team:
  module: wapc-context.wasm
  timeoutSeconds: 1
  settings: {namespaceLabel: team}
  contextAwareResources: [{apiVersion: v1, kind: Namespace}]
`

// denial posts a pod in namespace shop to ns-team and returns the denial's message and how long
// the answer took; an admission fails the test (every case here must fail closed).
func denial(t *testing.T, ts *testServer) (string, int32, time.Duration) {
	t.Helper()
	start := time.Now()
	_, r, raw := ts.post(t, "/validate/ns-team", podRequest(t, "shop", nil, container("c", "nginx:1.27", false)))
	took := time.Since(start)
	if r == nil || r.Allowed {
		t.Fatalf("want a denial, got %s", raw)
	}
	return message(r), r.Result.Code, took
}

func TestContextAware_UnreachableAPIServer_DeniesWithTheConnectionError(t *testing.T) {
	host, err := capabilities.New(capabilities.Options{Kubernetes: &rest.Config{Host: "https://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServerWith(t, testModules(t), namespaceLookup, Options{Host: host})
	msg, _, _ := denial(t, ts)
	if !strings.HasPrefix(msg, "cannot read namespace shop: resolve v1 Namespace: ") || !strings.Contains(msg, "connection refused") {
		t.Fatalf("want the lookup's connection error, got %q", msg)
	}
}

func TestContextAware_HangingAPIServer_IsAnsweredWithinThePolicyTimeout(t *testing.T) {
	release := make(chan struct{})
	apiserver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers while the test runs
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(apiserver.Close)
	t.Cleanup(func() { close(release) }) // runs first: Close waits for handlers
	host, err := capabilities.New(capabilities.Options{Kubernetes: &rest.Config{Host: apiserver.URL}})
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServerWith(t, testModules(t), namespaceLookup, Options{Host: host})
	msg, code, took := denial(t, ts)
	if code != http.StatusGatewayTimeout || !strings.Contains(msg, "evaluation timed out after") ||
		!strings.HasSuffix(msg, "(limit 1s), waiting for host capability kubewarden/kubernetes/get_resource") {
		t.Fatalf("want a 504 naming the capability it waited for, got %d %q", code, msg)
	}
	if took > 3*time.Second {
		t.Fatalf("answered after %s; the policy's timeout is 1s", took)
	}
}

func TestContextAware_ServerWithoutHost_DeniesSayingSo(t *testing.T) {
	ts := newTestServerWith(t, testModules(t), namespaceLookup, Options{})
	msg, _, _ := denial(t, ts)
	want := "cannot read namespace shop: host capability kubewarden/kubernetes/get_resource is not available: this policy server was started without host capabilities"
	if msg != want {
		t.Fatalf("want %q, got %q", want, msg)
	}
}

func TestContextAware_ServerWithoutKubernetes_DeniesSayingSo(t *testing.T) {
	host, err := capabilities.New(capabilities.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServerWith(t, testModules(t), namespaceLookup, Options{Host: host})
	msg, _, _ := denial(t, ts)
	if !strings.Contains(msg, "host capability kubewarden/kubernetes/get_resource: this policy server has no Kubernetes access configured") {
		t.Fatalf("got %q", msg)
	}
}

func TestContextAware_PinnedImages_AskTheRegistryForTheDigest(t *testing.T) {
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	repo := strings.TrimPrefix(reg.URL, "http://") + "/apps/web"
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(repo + ":v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	digest, _ := img.Digest()
	host, err := capabilities.New(capabilities.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServerWith(t, testModules(t), "pinned:\n  module: wapc-context.wasm\n  settings: {pinnedImages: true}\n", Options{Host: host})

	_, r, _ := ts.post(t, "/validate/pinned", podRequest(t, "shop", nil, container("c", repo+":v1", false)))
	if want := "image " + repo + ":v1 is not pinned to its digest " + digest.String(); r.Allowed || message(r) != want {
		t.Fatalf("a tag: want %q, got allowed=%v %q", want, r.Allowed, message(r))
	}
	if _, r, _ := ts.post(t, "/validate/pinned", podRequest(t, "shop", nil, container("c", repo+"@"+digest.String(), false))); !r.Allowed {
		t.Fatalf("the digest: want admission, got %q", message(r))
	}
	_, r, _ = ts.post(t, "/validate/pinned", podRequest(t, "shop", nil, container("c", repo+":missing", false)))
	if r.Allowed || !strings.HasPrefix(message(r), "cannot resolve image "+repo+":missing: oci v1/manifest_digest") {
		t.Fatalf("an unknown tag: want the registry's error, got allowed=%v %q", r.Allowed, message(r))
	}
}
