// Package signaturestest signs artifacts in tests as `cosign sign --key` does, so that tests of
// verification do not need cosign.
package signaturestest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"regent.dev/regent/policyserver/signatures"
)

// Key is an ECDSA P-256 key pair, the kind `cosign generate-key-pair` makes.
type Key struct {
	Signer    signature.Signer
	PublicPEM string
}

// NewKey makes a key for the test.
func NewKey(t testing.TB) Key {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := signature.LoadSigner(priv, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return Key{Signer: s, PublicPEM: string(pub)}
}

// Sign adds a signature of the artifact at digest, made with key and carrying annotations, to
// its signature image, as cosign does (earlier signatures stay).
func Sign(t testing.TB, digest name.Digest, key Key, annotations map[string]string) {
	t.Helper()
	optional := map[string]any{}
	for k, v := range annotations {
		optional[k] = v
	}
	body, err := payload.Cosign{Image: digest, Annotations: optional}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	SignPayload(t, digest, key, body)
}

// SignPayload adds a signature of body, whatever it says, to the signature image of digest.
func SignPayload(t testing.TB, digest name.Digest, key Key, body []byte) {
	t.Helper()
	sig, err := key.Signer.SignMessage(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	appendSignature(t, digest, body, map[string]string{signatures.SignatureAnnotation: base64.StdEncoding.EncodeToString(sig)})
}

// appendSignature adds a layer of body with annotations to the signature image of digest.
func appendSignature(t testing.TB, digest name.Digest, body []byte, annotations map[string]string) {
	t.Helper()
	tag := signatures.SignatureTag(digest)
	var base v1.Image = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	if existing, err := remote.Image(tag); err == nil {
		base = existing
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:       static.NewLayer(body, signatures.SimpleSigningMediaType),
		Annotations: annotations,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
}
