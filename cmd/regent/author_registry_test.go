package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"regent.dev/regent/policyserver/engine"
)

// TestPolicyPushPull_SignedRoundTripThePolicyServerRuns pushes an OPA-built module to a real
// (in-process) registry with a cosign key, pulls it back verifying the signature, and runs it
// from the registry with policy run.
func TestPolicyPushPull_SignedRoundTripThePolicyServerRuns(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/policies/require-team-label:v1"
	dir := t.TempDir()

	src, err := os.ReadFile(regoPolicy)
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := engine.CompileRego(context.Background(), map[string]string{"policy.rego": string(src)}, "policy/main", false)
	if err != nil {
		t.Fatal(err)
	}
	module := filepath.Join(dir, "policy.wasm")
	write := func(path string, b []byte) {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(module, wasm)

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := encrypted.Encrypt(der, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(dir, "cosign.key"), pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED SIGSTORE PRIVATE KEY", Bytes: enc}))
	pub, err := cryptoutils.MarshalPublicKeyToPEM(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(dir, "cosign.pub"), pub)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherPub, _ := cryptoutils.MarshalPublicKeyToPEM(&other.PublicKey)
	write(filepath.Join(dir, "other.pub"), otherPub)

	if _, errOut, code := regentEnv(t, []string{"COSIGN_PASSWORD=wrong"}, "policy", "push", module, ref, "--key", filepath.Join(dir, "cosign.key")); code != 1 || !strings.Contains(errOut, "decrypt") {
		t.Errorf("wrong password: exit %d, %s", code, errOut)
	}
	out, errOut, code := regentEnv(t, []string{"COSIGN_PASSWORD=pw"}, "policy", "push", module, ref, "--key", filepath.Join(dir, "cosign.key"))
	digestRef := strings.TrimSpace(out)
	if code != 0 || !strings.Contains(digestRef, "@sha256:") || !strings.Contains(errOut, "signed:") {
		t.Fatalf("push: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	pulled := filepath.Join(dir, "pulled.wasm")
	if _, errOut, code := regent(t, "policy", "pull", ref, "-o", pulled, "--key", filepath.Join(dir, "cosign.pub")); code != 0 || !strings.Contains(errOut, "verified: "+digestRef) {
		t.Fatalf("pull: exit %d, %s", code, errOut)
	}
	if got, err := os.ReadFile(pulled); err != nil || string(got) != string(wasm) {
		t.Errorf("pulled %d bytes (%v), pushed %d", len(got), err, len(wasm))
	}
	if _, errOut, code := regent(t, "policy", "pull", ref, "-o", filepath.Join(dir, "x.wasm"), "--key", filepath.Join(dir, "other.pub")); code != 1 || !strings.Contains(errOut, "no valid signature") {
		t.Errorf("pull with another key: exit %d, %s", code, errOut)
	}

	out, _, code = regent(t, "policy", "run", "-p", "registry://"+digestRef, "--execution-mode", "opa", "--entrypoint", "policy/main", "-r", podNoTeam)
	if code != exitNo || !strings.Contains(out, "Pod web has no team label") {
		t.Errorf("run from the registry: exit %d, %s", code, out)
	}
}
