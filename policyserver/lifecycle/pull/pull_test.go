package pull_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"regent.dev/regent/policyserver/lifecycle/internal/sources"
	"regent.dev/regent/policyserver/lifecycle/pull"
)

var module = []byte("\x00asm\x01\x00\x00\x00 a module")

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func TestFetch_EachSource_RecordsTheDigestOfTheModule(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.wasm")
	if err := os.WriteFile(path, module, 0o644); err != nil {
		t.Fatal(err)
	}
	web := sources.NewHTTPS(t)
	reg := sources.NewRegistry(t)

	for _, tc := range []struct{ name, ref string }{
		{"plain path", path},
		{"file", "file://" + path},
		{"https", web.Put(t, "policy.wasm", module)},
		{"registry", reg.Push(t, "policies/labels:v1", module)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := pull.Fetch(context.Background(), tc.ref, pull.Options{CAs: web.CAs, FileRoots: []string{filepath.Dir(path)}})
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Bytes) != string(module) || m.Digest != digestOf(module) {
				t.Fatalf("got %q %s", m.Bytes, m.Digest)
			}
		})
	}
}

func TestFetch_Failures_SayWhatFailed(t *testing.T) {
	tlsServer := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsServer.Close()
	reg := sources.NewRegistry(t)
	for _, tc := range []struct{ name, ref, want string }{
		{"missing file", "/does/not/exist.wasm", "no such file"},
		{"https without the CA", tlsServer.URL + "/x.wasm", "certificate"},
		{"unreachable registry", "registry://127.0.0.1:1/policies/x:v1", "connection refused"},
		{"unknown tag", "registry://" + reg.Host + "/policies/x:nope", "UNKNOWN"},
		{"unknown scheme", "ftp://example.com/x.wasm", "unsupported scheme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pull.Fetch(context.Background(), tc.ref, pull.Options{FileRoots: []string{"/does"}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}
