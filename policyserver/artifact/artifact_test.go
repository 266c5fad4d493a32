package artifact_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	"github.com/sigstore/sigstore/pkg/signature"

	"regent.dev/regent/policyserver/artifact"
	"regent.dev/regent/policyserver/lifecycle/pull"
)

// module is the smallest valid wasm module: the header and version.
var module = []byte("\x00asm\x01\x00\x00\x00")

func newRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestPushPull_RoundTripsInTheLayoutThePolicyServerPulls(t *testing.T) {
	ctx := context.Background()
	ref := newRegistry(t) + "/policies/labels:v1"
	digest, err := artifact.Push(ctx, module, "labels.wasm", ref, artifact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != artifact.ConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != pull.WasmLayerMediaType ||
		m.Layers[0].Annotations["org.opencontainers.image.title"] != "labels.wasm" {
		t.Errorf("manifest %+v", m)
	}
	// The policy server's own pull, by tag and pinned by the pushed digest.
	for _, r := range []string{ref, digest.String()} {
		got, err := artifact.Pull(ctx, r, artifact.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Bytes) != string(module) || got.Digest != m.Layers[0].Digest.String() {
			t.Errorf("%s: pulled %q %s", r, got.Bytes, got.Digest)
		}
	}
}

func TestPush_RefusesWhatIsNotWebAssembly(t *testing.T) {
	_, err := artifact.Push(context.Background(), []byte("package policy\n"), "policy.rego", newRegistry(t)+"/p:v1", artifact.Options{})
	if err == nil || !strings.Contains(err.Error(), "not a WebAssembly module") {
		t.Errorf("err %v", err)
	}
}

// cosignKey makes a key pair as `cosign generate-key-pair` does: an ECDSA P-256 key, PKCS#8,
// encrypted with the password, in an ENCRYPTED SIGSTORE PRIVATE KEY block.
func cosignKey(t *testing.T, password string) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := encrypted.Encrypt(der, []byte(password))
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED SIGSTORE PRIVATE KEY", Bytes: enc}), key
}

func TestSign_CosignSignatureVerifiesWithTheKeyAndOnlyForThatDigest(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	digest, err := artifact.Push(ctx, module, "m.wasm", reg+"/policies/m:v1", artifact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pemKey, key := cosignKey(t, "s3cret")
	if _, err := artifact.LoadPrivateKey(pemKey, []byte("wrong")); err == nil {
		t.Error("decrypted with the wrong password")
	}
	signer, err := artifact.LoadPrivateKey(pemKey, []byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	tag, err := artifact.Sign(ctx, digest, signer, artifact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(tag.String(), "/policies/m:sha256-"+strings.TrimPrefix(digest.DigestStr(), "sha256:")+".sig") {
		t.Errorf("signature tag %s", tag)
	}
	verifier, err := signature.LoadVerifier(&key.PublicKey, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if err := artifact.Verify(ctx, digest, verifier, artifact.Options{}); err != nil {
		t.Errorf("verify: %v", err)
	}

	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherVerifier, err := signature.LoadVerifier(&other.PublicKey, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if err := artifact.Verify(ctx, digest, otherVerifier, artifact.Options{}); err == nil {
		t.Error("verified with another key")
	}
	unsigned, err := artifact.Push(ctx, append(append([]byte{}, module...), 0), "m.wasm", reg+"/policies/m:v2", artifact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := artifact.Verify(ctx, unsigned, verifier, artifact.Options{}); err == nil {
		t.Error("an unsigned digest verified")
	}
	// A signature copied to another digest's tag names the wrong digest.
	sigImg, err := remote.Image(tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(artifact.SignatureTag(unsigned), sigImg); err != nil {
		t.Fatal(err)
	}
	if err := artifact.Verify(ctx, unsigned, verifier, artifact.Options{}); err == nil || !strings.Contains(err.Error(), "not "+unsigned.DigestStr()) {
		t.Errorf("copied signature: %v", err)
	}
}
