package pull_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"

	"regent.dev/regent/policyserver/lifecycle/internal/sources"
	"regent.dev/regent/policyserver/lifecycle/pull"
)

// A private registry: the module is pulled with the credentials of the Docker config that
// $DOCKER_CONFIG names (where a PolicyServer's imagePullSecret is mounted), refused without.
func TestFetch_PrivateRegistry_UsesTheDockerConfigCredentials(t *testing.T) {
	store := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	open := httptest.NewServer(store)
	defer open.Close()
	guarded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "robot" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		store.ServeHTTP(w, r)
	}))
	defer guarded.Close()
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: static.NewLayer(module, pull.WasmLayerMediaType)})
	if err != nil {
		t.Fatal(err)
	}
	openHost, guardedHost := strings.TrimPrefix(open.URL, "http://"), strings.TrimPrefix(guarded.URL, "http://")
	ref := strings.Replace((&sources.Registry{Host: openHost}).PushImage(t, "private/policy:v1", img), openHost, guardedHost, 1)

	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials
	if _, err := pull.Fetch(context.Background(), ref, pull.Options{}); err == nil || !strings.Contains(err.Error(), "UNAUTHORIZED") && !strings.Contains(err.Error(), "401") {
		t.Fatalf("without credentials: %v, want unauthorized", err)
	}

	dir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("robot:s3cret"))
	config := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, guardedHost, auth)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)
	m, err := pull.Fetch(context.Background(), ref, pull.Options{})
	if err != nil || string(m.Bytes) != string(module) {
		t.Fatalf("with the Docker config: %q, %v", m.Bytes, err)
	}
}
